//! Helpers shared by the pypaimon integration tests: run the `lakejoin` binary and the
//! pypaimon oracle (`integration-tests/py/oracle.py`), compare rows, model table state.

#![allow(dead_code)]

pub mod broker;
pub mod debezium;
pub mod fixture;
pub mod flink;
pub mod java;
mod model;
pub mod moto;
pub mod shop;

// Every test binary compiles this module, and not every one uses the models.
#[allow(unused_imports)]
pub use model::{DedupModel, PartialUpdateModel};

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use serde_json::{Map, Value, json};

/// The Python interpreter that has pypaimon installed.
pub fn python() -> PathBuf {
    let path = match std::env::var_os("LAKEJOIN_PYTHON") {
        Some(path) => PathBuf::from(path),
        None => Path::new(env!("CARGO_MANIFEST_DIR")).join(".venv/bin/python"),
    };
    assert!(
        path.exists(),
        "no Python with pypaimon at {}: run `scripts/test.sh` (it creates .venv with \
         pypaimon==2.1.0), or set LAKEJOIN_PYTHON to such an interpreter",
        path.display()
    );
    path
}

pub fn oracle_script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("integration-tests/py/oracle.py")
}

pub fn lakejoin_bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_lakejoin"))
}

/// Runs a program with `stdin` fed in full and returns its output (never panics on failure).
pub fn run(mut command: Command, stdin: &str) -> Output {
    command
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let description = format!("{command:?}");
    let mut child = command
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {description}: {e}"));
    let mut child_stdin = child.stdin.take().expect("stdin is piped");
    let input = stdin.to_owned();
    // Feed stdin from a thread so a child that writes a lot before reading cannot deadlock.
    let feeder = std::thread::spawn(move || {
        // A child that exits early (bad input) closes its stdin; that is not our error.
        let _ = child_stdin.write_all(input.as_bytes());
    });
    let output = child
        .wait_with_output()
        .unwrap_or_else(|e| panic!("waiting for {description}: {e}"));
    feeder.join().expect("stdin feeder thread");
    output
}

fn describe(what: &str, output: &Output) -> String {
    format!(
        "{what} exited with {}\n--- stdout ---\n{}\n--- stderr ---\n{}",
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

pub fn expect_success(what: &str, output: Output) -> String {
    assert!(output.status.success(), "{}", describe(what, &output));
    String::from_utf8(output.stdout).unwrap_or_else(|e| panic!("{what}: stdout is not UTF-8: {e}"))
}

/// Parses JSON lines (blank lines ignored).
pub fn parse_jsonl(what: &str, text: &str) -> Vec<Value> {
    text.lines()
        .filter(|line| !line.trim().is_empty())
        .map(|line| {
            serde_json::from_str(line)
                .unwrap_or_else(|e| panic!("{what}: not a JSON line: {line:?}: {e}"))
        })
        .collect()
}

pub fn to_jsonl(rows: &[Value]) -> String {
    let mut text = String::new();
    for row in rows {
        text.push_str(&row.to_string());
        text.push('\n');
    }
    text
}

/// Reads a table that something else created (for example `lakejoin run`) with pypaimon.
pub fn oracle_read(warehouse: &str, table: &str) -> Vec<Value> {
    let mut command = Command::new(python());
    command
        .arg(oracle_script())
        .args(["read", "--warehouse", warehouse, "--table", table])
        .env("PYTHONIOENCODING", "utf-8")
        .env("PYTHONDONTWRITEBYTECODE", "1");
    let output = run(command, "");
    parse_jsonl("oracle read", &expect_success("oracle read", output))
}

/// Writes `rows` to a table that something else created with one pypaimon batch commit.
pub fn oracle_write(warehouse: &str, table: &str, rows: &[Value]) {
    let mut command = Command::new(python());
    command
        .arg(oracle_script())
        .args(["write", "--warehouse", warehouse, "--table", table])
        .env("PYTHONIOENCODING", "utf-8")
        .env("PYTHONDONTWRITEBYTECODE", "1");
    let output = run(command, &to_jsonl(rows));
    expect_success("oracle write", output);
}

/// A table definition, turned into the same arguments for `lakejoin table create` and the
/// oracle's `create`.
#[derive(Clone, Debug)]
pub struct TableSpec {
    pub name: String,
    pub columns: Vec<(String, String)>,
    pub primary_key: Vec<String>,
    pub partition_by: Vec<String>,
    pub buckets: u32,
    pub merge_engine: Option<String>,
    pub sequence_field: Vec<String>,
    pub options: Vec<(String, String)>,
    /// Column comments (column, text), which only Java's create writes.
    pub comments: Vec<(String, String)>,
}

impl TableSpec {
    /// `columns` as `"name:TYPE"`; `primary_key` as column names.
    pub fn new(name: &str, columns: &[&str], primary_key: &[&str], buckets: u32) -> Self {
        let columns = columns
            .iter()
            .map(|spec| {
                let (name, ty) = spec
                    .split_once(':')
                    .unwrap_or_else(|| panic!("column spec must be name:TYPE, got {spec}"));
                (name.to_owned(), ty.to_owned())
            })
            .collect();
        TableSpec {
            name: name.to_owned(),
            columns,
            primary_key: primary_key.iter().map(|s| s.to_string()).collect(),
            partition_by: Vec::new(),
            buckets,
            merge_engine: None,
            sequence_field: Vec::new(),
            options: Vec::new(),
            comments: Vec::new(),
        }
    }

    pub fn partition_by(mut self, columns: &[&str]) -> Self {
        self.partition_by = columns.iter().map(|s| s.to_string()).collect();
        self
    }

    pub fn merge_engine(mut self, engine: &str) -> Self {
        self.merge_engine = Some(engine.to_owned());
        self
    }

    pub fn sequence_field(mut self, columns: &[&str]) -> Self {
        self.sequence_field = columns.iter().map(|s| s.to_string()).collect();
        self
    }

    pub fn option(mut self, key: &str, value: &str) -> Self {
        self.options.push((key.to_owned(), value.to_owned()));
        self
    }

    /// A comment on `column` (a table Java creates; `lakejoin table create` takes none).
    pub fn column_comment(mut self, column: &str, text: &str) -> Self {
        self.comments.push((column.to_owned(), text.to_owned()));
        self
    }

    pub fn column_names(&self) -> Vec<String> {
        self.columns.iter().map(|(name, _)| name.clone()).collect()
    }

    fn create_args(&self) -> Vec<String> {
        assert!(
            self.comments.is_empty(),
            "lakejoin table create takes no column comments"
        );
        let mut args = Vec::new();
        for (name, ty) in &self.columns {
            args.push("--column".to_owned());
            args.push(format!("{name}:{ty}"));
        }
        args.push("--primary-key".to_owned());
        args.push(self.primary_key.join(","));
        if !self.partition_by.is_empty() {
            args.push("--partition-by".to_owned());
            args.push(self.partition_by.join(","));
        }
        args.push("--buckets".to_owned());
        args.push(self.buckets.to_string());
        if let Some(engine) = &self.merge_engine {
            args.push("--merge-engine".to_owned());
            args.push(engine.clone());
        }
        if !self.sequence_field.is_empty() {
            args.push("--sequence-field".to_owned());
            args.push(self.sequence_field.join(","));
        }
        for (key, value) in &self.options {
            args.push("--option".to_owned());
            args.push(format!("{key}={value}"));
        }
        args
    }
}

/// Which implementation creates a table.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Creator {
    Lakejoin,
    Pypaimon,
}

/// A table in a temporary warehouse, driven through both implementations.
pub struct Table {
    _dir: tempfile::TempDir,
    pub warehouse: String,
    pub spec: TableSpec,
}

impl Table {
    pub fn create(spec: TableSpec, creator: Creator) -> Table {
        let dir = tempfile::tempdir().expect("temp dir");
        let warehouse = format!("file://{}/wh", dir.path().display());
        let table = Table {
            _dir: dir,
            warehouse,
            spec,
        };
        let args = table.spec.create_args();
        match creator {
            Creator::Lakejoin => {
                let output = table.lakejoin(&["table", "create"], &args, "");
                expect_success("lakejoin table create", output);
            }
            Creator::Pypaimon => {
                let output = table.oracle("create", &args, "");
                expect_success("oracle create", output);
            }
        }
        table
    }

    /// The table directory on disk: `<warehouse>/<db>.db/<table>`.
    pub fn path(&self) -> PathBuf {
        let (db, name) = self.spec.name.split_once('.').expect("table name is db.t");
        let root = self.warehouse.trim_start_matches("file://");
        Path::new(root).join(format!("{db}.db")).join(name)
    }

    fn common_args(&self) -> Vec<String> {
        vec![
            "--warehouse".to_owned(),
            self.warehouse.clone(),
            "--table".to_owned(),
            self.spec.name.clone(),
        ]
    }

    pub fn lakejoin(&self, subcommand: &[&str], args: &[String], stdin: &str) -> Output {
        let mut command = Command::new(lakejoin_bin());
        command
            .args(subcommand)
            .args(self.common_args())
            .args(args)
            .env("RUST_BACKTRACE", "1");
        run(command, stdin)
    }

    pub fn oracle(&self, subcommand: &str, args: &[String], stdin: &str) -> Output {
        let mut command = Command::new(python());
        command
            .arg(oracle_script())
            .arg(subcommand)
            .args(self.common_args())
            .args(args)
            .env("PYTHONIOENCODING", "utf-8")
            .env("PYTHONDONTWRITEBYTECODE", "1");
        run(command, stdin)
    }

    // ---- lakejoin ----

    /// `lakejoin table write` of `rows` (one commit); panics on failure.
    pub fn lj_write(&self, rows: &[Value], row_kind_field: Option<&str>) {
        let output = self.lj_write_raw(&to_jsonl(rows), row_kind_field);
        expect_success("lakejoin table write", output);
    }

    pub fn lj_write_raw(&self, stdin: &str, row_kind_field: Option<&str>) -> Output {
        let mut args = Vec::new();
        if let Some(field) = row_kind_field {
            args.push("--row-kind-field".to_owned());
            args.push(field.to_owned());
        }
        self.lakejoin(&["table", "write"], &args, stdin)
    }

    /// `lakejoin table scan`; also checks that every row lists the columns in schema order.
    pub fn lj_scan(&self, snapshot: Option<u64>, filter: Option<&str>) -> Vec<Value> {
        let filters: Vec<&str> = filter.into_iter().collect();
        self.lj_scan_where(snapshot, &filters)
    }

    /// `lakejoin table scan` with any number of `--where col=value` filters.
    pub fn lj_scan_where(&self, snapshot: Option<u64>, filters: &[&str]) -> Vec<Value> {
        let mut args = Vec::new();
        if let Some(id) = snapshot {
            args.push("--snapshot".to_owned());
            args.push(id.to_string());
        }
        for filter in filters {
            args.push("--where".to_owned());
            args.push(filter.to_string());
        }
        let output = self.lakejoin(&["table", "scan"], &args, "");
        let rows = parse_jsonl(
            "lakejoin table scan",
            &expect_success("lakejoin table scan", output),
        );
        let columns = self.spec.column_names();
        for row in &rows {
            let keys: Vec<String> = row
                .as_object()
                .unwrap_or_else(|| panic!("lakejoin table scan printed a non-object: {row}"))
                .keys()
                .cloned()
                .collect();
            assert_eq!(
                keys, columns,
                "lakejoin table scan: keys of {row} are not the schema columns in order"
            );
        }
        rows
    }

    pub fn lj_snapshots(&self) -> Vec<Value> {
        let output = self.lakejoin(&["table", "snapshots"], &[], "");
        parse_jsonl(
            "lakejoin table snapshots",
            &expect_success("lakejoin table snapshots", output),
        )
    }

    pub fn lj_compact_full(&self) {
        let output = self.lakejoin(&["table", "compact"], &["--full".to_owned()], "");
        expect_success("lakejoin table compact --full", output);
    }

    // ---- pypaimon ----

    /// One pypaimon batch commit of `rows`; panics on failure.
    pub fn py_write(&self, rows: &[Value]) {
        let output = self.oracle("write", &[], &to_jsonl(rows));
        expect_success("oracle write", output);
    }

    pub fn py_read(&self, snapshot: Option<u64>, filter: Option<&str>) -> Vec<Value> {
        let mut args = Vec::new();
        if let Some(id) = snapshot {
            args.push("--snapshot".to_owned());
            args.push(id.to_string());
        }
        if let Some(filter) = filter {
            args.push("--where".to_owned());
            args.push(filter.to_owned());
        }
        let output = self.oracle("read", &args, "");
        parse_jsonl("oracle read", &expect_success("oracle read", output))
    }

    /// Live data files of a snapshot (latest when `None`), as pypaimon reads the manifests.
    pub fn py_files(&self, snapshot: Option<u64>) -> Vec<Value> {
        let mut args = Vec::new();
        if let Some(id) = snapshot {
            args.push("--snapshot".to_owned());
            args.push(id.to_string());
        }
        let output = self.oracle("files", &args, "");
        parse_jsonl("oracle files", &expect_success("oracle files", output))
    }

    pub fn py_snapshots(&self) -> Vec<Value> {
        let output = self.oracle("snapshots", &[], "");
        parse_jsonl(
            "oracle snapshots",
            &expect_success("oracle snapshots", output),
        )
    }

    /// `{"files": [...], "rows": n, "mismatches": [...]}`
    pub fn py_bucket_check(&self) -> Value {
        let output = self.oracle("bucket-check", &[], "");
        let text = expect_success("oracle bucket-check", output);
        serde_json::from_str(text.trim())
            .unwrap_or_else(|e| panic!("oracle bucket-check printed {text:?}: {e}"))
    }

    // ---- both ----

    /// Reads the table with pypaimon and with lakejoin, asserts both equal `expected`
    /// (order-insensitive) and each other (in order, both sort by primary key).
    pub fn assert_both_read(&self, context: &str, expected: &[Value]) {
        self.assert_both_read_at(context, None, None, expected);
    }

    pub fn assert_both_read_at(
        &self,
        context: &str,
        snapshot: Option<u64>,
        filter: Option<&str>,
        expected: &[Value],
    ) {
        let key = &self.spec.primary_key;
        let py = self.py_read(snapshot, filter);
        assert_same_rows(
            &format!("{context}: pypaimon read vs expected"),
            expected,
            &py,
            key,
        );
        let lj = self.lj_scan(snapshot, filter);
        assert_same_rows(
            &format!("{context}: lakejoin scan vs expected"),
            expected,
            &lj,
            key,
        );
        assert_rows_in_order(
            &format!("{context}: lakejoin scan vs pypaimon read"),
            &py,
            &lj,
        );
    }
}

impl Table {
    /// Files live in snapshot `id` that were not live in snapshot `id - 1`: the files that
    /// commit `id` added.
    pub fn files_added_by(&self, id: u64) -> Vec<Value> {
        let before = if id > 1 {
            file_names(&self.py_files(Some(id - 1)))
        } else {
            Vec::new()
        };
        self.py_files(Some(id))
            .into_iter()
            .filter(|file| !before.contains(&file["fileName"].as_str().unwrap_or("").to_owned()))
            .collect()
    }

    /// The id of the latest snapshot, as pypaimon sees it.
    pub fn latest_snapshot_id(&self) -> u64 {
        let snapshots = self.py_snapshots();
        let last = snapshots.last().expect("the table has a snapshot");
        last["id"].as_u64().expect("snapshot id")
    }

    /// Checks the manifest entries of the files the latest commit added (a lakejoin commit)
    /// against the data files themselves; returns those entries.
    /// `level` and `file_source` are the values every new file must carry.
    pub fn check_latest_commit_files(
        &self,
        context: &str,
        level: i64,
        file_source: i64,
    ) -> Vec<Value> {
        // The writer may compact on its own right after an append (COMPACT snapshot), so
        // look at the newest snapshot of the kind the caller expects.
        let kind = if file_source == 1 {
            "COMPACT"
        } else {
            "APPEND"
        };
        let id = self
            .py_snapshots()
            .iter()
            .rev()
            .find(|s| s["commitKind"] == kind)
            .and_then(|s| s["id"].as_u64())
            .unwrap_or_else(|| self.latest_snapshot_id());
        let files = self.files_added_by(id);
        assert!(
            !files.is_empty(),
            "{context}: snapshot {id} added no data file"
        );
        for file in &files {
            let name = &file["fileName"];
            let check = |what: &str, manifest: &Value, physical: &Value| {
                assert_eq!(
                    manifest, physical,
                    "{context}: file {name}: manifest {what} is {manifest}, the file says {physical}\n  entry: {file}"
                );
            };
            check("_ROW_COUNT", &file["rowCount"], &file["physicalRowCount"]);
            check(
                "_DELETE_ROW_COUNT (-U/-D rows)",
                &file["deleteRowCount"],
                &file["retractRowCount"],
            );
            check(
                "_MIN_SEQUENCE_NUMBER",
                &file["minSequenceNumber"],
                &file["physicalMinSequenceNumber"],
            );
            check(
                "_MAX_SEQUENCE_NUMBER",
                &file["maxSequenceNumber"],
                &file["physicalMaxSequenceNumber"],
            );
            // (pypaimon decodes TIMESTAMP(7..9) keys with microseconds only: such keys
            // would differ here although the bytes are right.)
            check("_MIN_KEY", &file["minKey"], &file["firstKey"]);
            check("_MAX_KEY", &file["maxKey"], &file["lastKey"]);
            check("_LEVEL", &file["level"], &json!(level));
            check("_FILE_SOURCE", &file["fileSource"], &json!(file_source));
            check(
                "_TOTAL_BUCKETS",
                &file["totalBuckets"],
                &json!(self.spec.buckets),
            );
            assert_eq!(
                file["sortedUniqueKeys"],
                json!(true),
                "{context}: file {name} is not sorted by key with one row per key: {file}"
            );
            assert_eq!(
                file["keyColumnsMatch"],
                json!(true),
                "{context}: file {name}: _KEY_* columns differ from the key columns: {file}"
            );
            let bucket_dir = format!("/bucket-{}/", file["bucket"]);
            assert!(
                file["path"].as_str().unwrap_or("").contains(&bucket_dir),
                "{context}: file {name} is not under {bucket_dir}: {file}"
            );
        }
        files
    }

    /// Every snapshot's totalRecordCount equals the rows of its live files, and
    /// deltaRecordCount is the difference to the previous snapshot.
    pub fn check_snapshot_record_counts(&self, context: &str) {
        let snapshots = self.py_snapshots();
        let mut previous_total = 0;
        for snapshot in &snapshots {
            let id = snapshot["id"].as_u64().expect("snapshot id");
            let live_rows: i64 = self
                .py_files(Some(id))
                .iter()
                .map(|file| file["rowCount"].as_i64().expect("rowCount"))
                .sum();
            let total = snapshot["totalRecordCount"]
                .as_i64()
                .expect("totalRecordCount");
            let delta = snapshot["deltaRecordCount"]
                .as_i64()
                .expect("deltaRecordCount");
            assert_eq!(
                total, live_rows,
                "{context}: snapshot {id}: totalRecordCount {total} but its live files hold {live_rows} rows: {snapshot}"
            );
            assert_eq!(
                delta,
                total - previous_total,
                "{context}: snapshot {id}: deltaRecordCount {delta}, expected {total} - {previous_total}: {snapshot}"
            );
            previous_total = total;
        }
    }
}

/// Canonical text of a row's primary key, used as a model key and a sort key.
pub fn key_of(row: &Value, primary_key: &[String]) -> String {
    let values: Vec<Value> = primary_key
        .iter()
        .map(|column| row.get(column).cloned().unwrap_or(Value::Null))
        .collect();
    Value::Array(values).to_string()
}

fn sorted_by_key(rows: &[Value], primary_key: &[String]) -> Vec<Value> {
    let mut rows = rows.to_vec();
    rows.sort_by_cached_key(|row| key_of(row, primary_key));
    rows
}

fn show(rows: &[Value]) -> String {
    if rows.is_empty() {
        return "    (no rows)".to_owned();
    }
    rows.iter()
        .map(|row| format!("    {row}"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Same multiset of rows, whatever the order.
pub fn assert_same_rows(
    context: &str,
    expected: &[Value],
    actual: &[Value],
    primary_key: &[String],
) {
    let expected = sorted_by_key(expected, primary_key);
    let actual = sorted_by_key(actual, primary_key);
    if expected != actual {
        let missing: Vec<Value> = expected
            .iter()
            .filter(|row| !actual.contains(row))
            .cloned()
            .collect();
        let unexpected: Vec<Value> = actual
            .iter()
            .filter(|row| !expected.contains(row))
            .cloned()
            .collect();
        panic!(
            "{context}: rows differ ({} expected, {} actual)\n  missing (expected, not returned):\n{}\n  \
             unexpected (returned, not expected):\n{}\n  expected:\n{}\n  actual:\n{}",
            expected.len(),
            actual.len(),
            show(&missing),
            show(&unexpected),
            show(&expected),
            show(&actual)
        );
    }
}

/// Exactly the same rows in the same order.
pub fn assert_rows_in_order(context: &str, left: &[Value], right: &[Value]) {
    if left != right {
        let first_difference = left
            .iter()
            .zip(right)
            .position(|(a, b)| a != b)
            .unwrap_or(left.len().min(right.len()));
        panic!(
            "{context}: rows differ (first difference at row {first_difference}; {} vs {} rows)\n  \
             left:\n{}\n  right:\n{}",
            left.len(),
            right.len(),
            show(left),
            show(right)
        );
    }
}

/// Builds a full row (every column, missing ones null) from a partial JSON object.
pub fn full_row(spec: &TableSpec, partial: &Value) -> Value {
    let mut row = Map::new();
    for column in spec.column_names() {
        row.insert(
            column.clone(),
            partial.get(&column).cloned().unwrap_or(Value::Null),
        );
    }
    Value::Object(row)
}

/// Removes a field (e.g. the row-kind field) from a row.
pub fn without(row: &Value, field: &str) -> Value {
    let mut row = row.clone();
    if let Some(object) = row.as_object_mut() {
        object.shift_remove(field);
    }
    row
}

/// Number of snapshots pypaimon sees.
pub fn snapshot_count(table: &Table) -> usize {
    table.py_snapshots().len()
}

/// The `fileName`s of the live files of a snapshot.
pub fn file_names(files: &[Value]) -> Vec<String> {
    files
        .iter()
        .map(|file| file["fileName"].as_str().expect("fileName").to_owned())
        .collect()
}
