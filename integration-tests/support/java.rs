//! The Java Paimon oracle (`integration-tests/java`, Apache Paimon 1.4.2, the reference
//! implementation) for the round-trip tests of `java_paimon.rs`.
//!
//! Why a module of its own: the jar is built by `scripts/java-oracle.sh` (Maven, once, cached
//! in ~/.cache/lakejoin) and every call is a JVM start, so the jar is resolved once per test
//! process, and a class-data archive (AppCDS) made once per jar roughly halves each start on
//! this 2-core machine. The oracle's JSON differs from lakejoin's (BYTES hex, DATE epoch
//! days, TIMESTAMP with a `T`, infinities spelled out), so rows are mapped here, in one place,
//! and the tests speak lakejoin's encoding only.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use serde_json::{Map, Value, json};

use super::{
    Creator, Table, TableSpec, assert_same_rows, expect_success, key_of, parse_jsonl, run, to_jsonl,
};

/// The member both sides read the row kind from (`--row-kind-field` for lakejoin; the
/// oracle's fixed name).
pub const ROW_KIND: &str = "_rowkind";

/// JVM flags for short runs: the C1 compiler only and the serial collector start fastest,
/// and JVM log lines go to stderr so they can never mix with the JSON on stdout.
const JVM_FLAGS: [&str; 4] = [
    "-XX:TieredStopAtLevel=1",
    "-XX:+UseSerialGC",
    "-Xlog:disable",
    "-Xlog:all=warning:stderr",
];

struct Oracle {
    jar: PathBuf,
    /// The class-data archive, when one could be made.
    archive: Option<PathBuf>,
}

static ORACLE: OnceLock<Result<Oracle, String>> = OnceLock::new();

fn oracle() -> &'static Oracle {
    match ORACLE.get_or_init(prepare) {
        Ok(oracle) => oracle,
        Err(message) => panic!("{message}"),
    }
}

/// Checks for `java`, has the script build (or find) the jar, and makes the archive.
fn prepare() -> Result<Oracle, String> {
    let version = Command::new("java").arg("-version").output().map_err(|e| {
        format!(
            "cannot run `java` ({e}): the Java Paimon oracle needs a Java 17 runtime on PATH \
             (and `mvn`, once, to build it)"
        )
    })?;
    if !version.status.success() {
        return Err(format!(
            "`java -version` failed: {}",
            String::from_utf8_lossy(&version.stderr)
        ));
    }
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/java-oracle.sh");
    let output = Command::new(&script)
        .output()
        .map_err(|e| format!("cannot run {}: {e}", script.display()))?;
    if !output.status.success() {
        return Err(format!(
            "{} could not provide the Java Paimon oracle (is `mvn` installed? it builds the \
             jar once):\n{}",
            script.display(),
            String::from_utf8_lossy(&output.stderr)
        ));
    }
    let jar = PathBuf::from(String::from_utf8_lossy(&output.stdout).trim());
    if !jar.is_file() {
        return Err(format!(
            "{} printed {}, which is not a file",
            script.display(),
            jar.display()
        ));
    }
    // The archive is only valid for the JVM that made it: name it after that JVM.
    let jvm = String::from_utf8_lossy(&version.stderr)
        .lines()
        .nth(1)
        .unwrap_or("jvm")
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect::<String>();
    let archive = jar.with_file_name(format!("oracle-{jvm}.jsa"));
    let archive = if archive.is_file() {
        Some(archive)
    } else {
        make_archive(&jar, &archive)
            .map_err(|e| eprintln!("note: running the Java oracle without a class archive: {e}"))
            .ok()
    };
    Ok(Oracle { jar, archive })
}

/// Records the classes a compaction loads (it reads, writes and commits) into `archive`.
fn make_archive(jar: &Path, archive: &Path) -> Result<PathBuf, String> {
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let warehouse = format!("file://{}/wh", dir.path().display());
    let step = |extra: &[String], args: &[&str], stdin: &str| -> Result<(), String> {
        let mut command = Command::new("java");
        command
            .args(JVM_FLAGS)
            .args(extra)
            .arg("-jar")
            .arg(jar)
            .args(args);
        let output = run(command, stdin);
        if output.status.success() {
            Ok(())
        } else {
            Err(format!(
                "oracle {args:?}: {}",
                String::from_utf8_lossy(&output.stderr)
            ))
        }
    };
    let spec = r#"{"columns": [["id", "INT"], ["v", "STRING"]], "primary_keys": ["id"],
                   "options": {"bucket": "1"}}"#;
    step(&[], &["create", &warehouse, "db.warmup"], spec)?;
    step(
        &[],
        &["write", &warehouse, "db.warmup"],
        "{\"id\": 1, \"v\": \"a\"}\n",
    )?;
    step(
        &[],
        &["write", &warehouse, "db.warmup"],
        "{\"id\": 1, \"v\": \"b\"}\n",
    )?;
    // Written under a unique name and renamed, so concurrent test processes never see a
    // half-written archive.
    let partial = archive.with_extension(format!("jsa.{}", std::process::id()));
    step(
        &[format!("-XX:ArchiveClassesAtExit={}", partial.display())],
        &["compact", &warehouse, "db.warmup", "--full"],
        "",
    )?;
    std::fs::rename(&partial, archive).map_err(|e| format!("renaming the archive: {e}"))?;
    Ok(archive.to_path_buf())
}

/// `java -jar oracle.jar ARGS…` with `stdin`; the output, whatever the exit status.
pub fn java_oracle(args: &[String], stdin: &str) -> Output {
    let oracle = oracle();
    let mut command = Command::new("java");
    command.args(JVM_FLAGS);
    if let Some(archive) = &oracle.archive {
        command.arg(format!("-XX:SharedArchiveFile={}", archive.display()));
    }
    command.arg("-jar").arg(&oracle.jar).args(args);
    run(command, stdin)
}

/// How a column's values are spelled differently by the two programs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Encoding {
    /// The same JSON on both sides.
    Same,
    /// lakejoin base64, Java lowercase hex.
    Bytes,
    /// lakejoin `"YYYY-MM-DD"`, Java epoch days.
    Date,
    /// lakejoin `"YYYY-MM-DD HH:MM:SS"`, Java `"YYYY-MM-DDTHH:MM:SS"`.
    Timestamp,
    /// lakejoin `"inf"`/`"-inf"`, Java `"Infinity"`/`"-Infinity"` (NaN alike).
    Double,
    /// As [`Encoding::Double`]; also, Java prints a FLOAT with the digits of
    /// `Float.toString` (`1.4E-45`) and lakejoin with the shortest ones (`1e-45`), which
    /// are different doubles but the same float.
    Float,
}

fn encoding(type_text: &str) -> Encoding {
    let upper = type_text.trim().to_ascii_uppercase();
    let base = upper.split(['(', ' ']).next().unwrap_or("");
    match base {
        "BYTES" | "BINARY" | "VARBINARY" => Encoding::Bytes,
        "DATE" => Encoding::Date,
        "TIMESTAMP" | "TIMESTAMP_LTZ" => Encoding::Timestamp,
        "FLOAT" => Encoding::Float,
        "DOUBLE" => Encoding::Double,
        _ => Encoding::Same,
    }
}

fn epoch_days_to_text(days: i64) -> String {
    let epoch = chrono::NaiveDate::from_ymd_opt(1970, 1, 1).expect("epoch");
    (epoch + chrono::Duration::days(days))
        .format("%Y-%m-%d")
        .to_string()
}

fn java_value(value: &Value, encoding: Encoding) -> Value {
    match (encoding, value) {
        (Encoding::Bytes, Value::String(text)) => {
            let bytes = BASE64
                .decode(text)
                .unwrap_or_else(|e| panic!("test data: {text:?} is not base64: {e}"));
            Value::String(bytes.iter().map(|b| format!("{b:02x}")).collect())
        }
        (Encoding::Float | Encoding::Double, Value::String(text)) => match text.as_str() {
            "inf" => json!("Infinity"),
            "-inf" => json!("-Infinity"),
            _ => value.clone(),
        },
        _ => value.clone(),
    }
}

fn lakejoin_value(value: &Value, encoding: Encoding) -> Value {
    match (encoding, value) {
        (Encoding::Bytes, Value::String(hex)) => {
            let bytes: Vec<u8> = (0..hex.len())
                .step_by(2)
                .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).expect("the oracle prints hex"))
                .collect();
            Value::String(BASE64.encode(bytes))
        }
        (Encoding::Date, Value::Number(days)) => {
            Value::String(epoch_days_to_text(days.as_i64().expect("epoch days")))
        }
        (Encoding::Timestamp, Value::String(text)) => Value::String(text.replacen('T', " ", 1)),
        (Encoding::Float | Encoding::Double, Value::String(text)) => match text.as_str() {
            "Infinity" => json!("inf"),
            "-Infinity" => json!("-inf"),
            _ => value.clone(),
        },
        (Encoding::Float, Value::Number(number)) => {
            // Printed as lakejoin prints an f32: its shortest round-trip digits.
            let float = number.as_f64().expect("a FLOAT is a number") as f32;
            serde_json::from_str(&format!("{float:?}")).expect("a finite float prints as JSON")
        }
        _ => value.clone(),
    }
}

fn map_row(spec: &TableSpec, row: &Value, to_java: bool) -> Value {
    let object = row
        .as_object()
        .unwrap_or_else(|| panic!("a row is a JSON object, not {row}"));
    let mut out = Map::new();
    for (name, value) in object {
        let encoding = spec
            .columns
            .iter()
            .find(|(column, _)| column == name)
            .map_or(Encoding::Same, |(_, ty)| encoding(ty));
        let mapped = if to_java {
            java_value(value, encoding)
        } else {
            lakejoin_value(value, encoding)
        };
        out.insert(name.clone(), mapped);
    }
    Value::Object(out)
}

/// A row in lakejoin's encoding as the oracle reads it (`_rowkind` passes through).
pub fn to_java_row(spec: &TableSpec, row: &Value) -> Value {
    map_row(spec, row, true)
}

/// A row the oracle printed, in lakejoin's encoding.
pub fn from_java_row(spec: &TableSpec, row: &Value) -> Value {
    map_row(spec, row, false)
}

impl TableSpec {
    /// The oracle's `create` spec of this table.
    fn java_create_spec(&self) -> Value {
        let mut options = Map::new();
        options.insert("bucket".into(), json!(self.buckets.to_string()));
        if let Some(engine) = &self.merge_engine {
            options.insert("merge-engine".into(), json!(engine));
        }
        if !self.sequence_field.is_empty() {
            options.insert(
                "sequence.field".into(),
                json!(self.sequence_field.join(",")),
            );
        }
        for (key, value) in &self.options {
            options.insert(key.clone(), json!(value));
        }
        json!({
            "columns": self.columns.iter().map(|(n, t)| {
                match self.comments.iter().find(|(c, _)| c == n) {
                    Some((_, comment)) => json!([n, t, comment]),
                    None => json!([n, t]),
                }
            }).collect::<Vec<_>>(),
            "primary_keys": self.primary_key,
            "partition_keys": self.partition_by,
            "options": options,
        })
    }
}

impl Table {
    /// A table in a new temporary warehouse, created by Java Paimon.
    pub fn create_with_java(spec: TableSpec) -> Table {
        let dir = tempfile::tempdir().expect("temp dir");
        let warehouse = format!("file://{}/wh", dir.path().display());
        let table = Table {
            _dir: dir,
            warehouse,
            spec,
        };
        let create = table.spec.java_create_spec().to_string();
        expect_success("java create", table.java("create", &[], &create));
        table
    }

    /// `java -jar oracle.jar COMMAND WAREHOUSE DB.TABLE ARGS…`.
    pub fn java(&self, command: &str, args: &[String], stdin: &str) -> Output {
        let mut all = vec![
            command.to_owned(),
            self.warehouse.clone(),
            self.spec.name.clone(),
        ];
        all.extend_from_slice(args);
        java_oracle(&all, stdin)
    }

    /// Java's merged read (at `snapshot`), in lakejoin's encoding.
    pub fn java_read(&self, snapshot: Option<u64>) -> Vec<Value> {
        let args: Vec<String> = snapshot
            .map(|id| vec!["--snapshot".to_owned(), id.to_string()])
            .unwrap_or_default();
        let text = expect_success("java read", self.java("read", &args, ""));
        parse_jsonl("java read", &text)
            .iter()
            .map(|row| from_java_row(&self.spec, row))
            .collect()
    }

    /// One Java batch commit of `rows` (lakejoin's encoding, optional `_rowkind`);
    /// returns the latest snapshot id afterwards.
    pub fn java_write(&self, rows: &[Value]) -> u64 {
        let java_rows: Vec<Value> = rows.iter().map(|r| to_java_row(&self.spec, r)).collect();
        let output = self.java("write", &[], &to_jsonl(&java_rows));
        latest_id("java write", output)
    }

    /// Java's compaction of every bucket (`--full`: into one run); the latest snapshot id.
    pub fn java_compact(&self, full: bool) -> u64 {
        let args: Vec<String> = if full {
            vec!["--full".to_owned()]
        } else {
            Vec::new()
        };
        latest_id("java compact", self.java("compact", &args, ""))
    }

    /// Java expires all but the newest `retain_max` snapshots; returns how many it expired.
    pub fn java_expire(&self, retain_max: usize) -> u64 {
        let args = vec!["--retain-max".to_owned(), retain_max.to_string()];
        let text = expect_success("java expire", self.java("expire", &args, ""));
        text.trim()
            .parse()
            .unwrap_or_else(|e| panic!("java expire printed {text:?}: {e}"))
    }

    /// The oracle's `read-incremental FROM TO`, `audit-log` or `stream` output, rows in
    /// lakejoin's encoding (`_rowkind` and the audit log's `rowkind` pass through).
    pub fn java_changes(&self, command: &str, args: &[String]) -> Vec<Value> {
        let text = expect_success(&format!("java {command}"), self.java(command, args, ""));
        parse_jsonl(&format!("java {command}"), &text)
            .iter()
            .map(|row| from_java_row(&self.spec, row))
            .collect()
    }

    pub fn java_snapshots(&self) -> Vec<Value> {
        let text = expect_success("java snapshots", self.java("snapshots", &[], ""));
        parse_jsonl("java snapshots", &text)
    }

    /// The table as Java sees its schema (the oracle's create spec plus `schema_id`).
    pub fn java_schema(&self) -> Value {
        let text = expect_success("java schema", self.java("schema", &[], ""));
        serde_json::from_str(text.trim())
            .unwrap_or_else(|e| panic!("java schema printed {text:?}: {e}"))
    }

    /// `lakejoin table get` of one primary key: the row, or `None` when absent (exit 1).
    pub fn lj_get(&self, key: &Value) -> Option<Value> {
        let output = self.lakejoin(
            &["table", "get"],
            &["--key".to_owned(), key.to_string()],
            "",
        );
        if output.status.code() == Some(1) && output.stdout.is_empty() {
            return None;
        }
        let text = expect_success("lakejoin table get", output);
        let rows = parse_jsonl("lakejoin table get", &text);
        assert_eq!(rows.len(), 1, "lakejoin table get {key} printed {text:?}");
        rows.into_iter().next()
    }

    /// `lakejoin table expire --retain-max N` (and at least that many kept).
    pub fn lj_expire(&self, retain_max: usize) {
        let args = vec![
            "--retain-max".to_owned(),
            retain_max.to_string(),
            "--retain-min".to_owned(),
            retain_max.to_string(),
        ];
        let output = self.lakejoin(&["table", "expire"], &args, "");
        expect_success("lakejoin table expire", output);
    }
}

fn latest_id(what: &str, output: Output) -> u64 {
    let text = expect_success(what, output);
    text.trim()
        .parse()
        .unwrap_or_else(|e| panic!("{what} printed {text:?}, not a snapshot id: {e}"))
}

/// Rows written in commits (lakejoin's encoding, each with an optional `_rowkind`) and the
/// table they must leave: from a model, or worked out by hand from Paimon's merge rules.
pub struct Case {
    pub spec: TableSpec,
    pub commits: Vec<Vec<Value>>,
    /// `None`: Java's read of the same commits, written by Java, is the reference.
    pub expected: Option<Vec<Value>>,
}

/// Reads the table with Java and with lakejoin, asserts they hold the same rows (and
/// `expected`, when given); returns Java's rows.
pub fn assert_java_and_lakejoin_read(
    table: &Table,
    context: &str,
    expected: Option<&[Value]>,
) -> Vec<Value> {
    let key = &table.spec.primary_key;
    let java = table.java_read(None);
    let lakejoin = table.lj_scan(None, None);
    assert_same_rows(
        &format!("{context}: Java read (expected) vs lakejoin scan (actual)"),
        &java,
        &lakejoin,
        key,
    );
    if let Some(expected) = expected {
        assert_same_rows(
            &format!("{context}: the model (expected) vs Java read (actual)"),
            expected,
            &java,
            key,
        );
    }
    java
}

/// lakejoin writes the commits; Java reads after every step of the table's life: lakejoin
/// appends, Java's full compaction of lakejoin's files, more lakejoin appends over Java's
/// files, lakejoin's full compaction, the last commit, then expiry by Java (lakejoin scans)
/// and by lakejoin (Java reads).
pub fn lakejoin_writes_java_reads(case: Case) {
    let Case {
        spec,
        commits,
        expected,
    } = case;
    assert!(commits.len() >= 3, "a case needs at least three commits");
    let expected = expected.or_else(|| Some(java_reference(&spec, &commits)));
    let table = Table::create(spec, Creator::Lakejoin);
    let (last, rest) = commits.split_last().expect("commits");
    let (early, late) = rest.split_at(commits.len() / 2);
    for commit in early {
        table.lj_write(commit, Some(ROW_KIND));
    }
    assert_java_and_lakejoin_read(&table, "after lakejoin's first commits", None);
    table.java_compact(true);
    assert_java_and_lakejoin_read(&table, "after Java's full compaction", None);
    for commit in late {
        table.lj_write(commit, Some(ROW_KIND));
    }
    assert_java_and_lakejoin_read(&table, "after lakejoin appended to Java's files", None);
    table.lj_compact_full();
    assert_java_and_lakejoin_read(&table, "after lakejoin's full compaction", None);
    table.lj_write(last, Some(ROW_KIND));
    let rows = assert_java_and_lakejoin_read(&table, "after every commit", expected.as_deref());
    let key = &table.spec.primary_key;

    let snapshots = table.java_snapshots().len();
    let expired = table.java_expire(2);
    assert_eq!(
        expired as usize,
        snapshots - 2,
        "Java expired {expired} of {snapshots} snapshots, keeping 2"
    );
    assert_same_rows(
        "after Java's expiry: rows before (expected) vs lakejoin scan (actual)",
        &rows,
        &table.lj_scan(None, None),
        key,
    );
    table.lj_expire(1);
    assert_same_rows(
        "after lakejoin's expiry: rows before (expected) vs Java read (actual)",
        &rows,
        &table.java_read(None),
        key,
    );
    let left = table.java_snapshots();
    assert_eq!(left.len(), 1, "lakejoin expired to one snapshot: {left:?}");
}

/// What Java reads after writing `commits` into a table of its own.
pub fn java_reference(spec: &TableSpec, commits: &[Vec<Value>]) -> Vec<Value> {
    let table = Table::create_with_java(spec.clone());
    for commit in commits {
        table.java_write(commit);
    }
    table.java_read(None)
}

/// lakejoin and Java each write the commits into a table of their own (so each folds the
/// commits its own way); Java's read of its own table is the reference (and must equal
/// `expected`, when given) for both programs' reads of lakejoin's table and for lakejoin's
/// scan of Java's.
pub fn lakejoin_writes_as_java_does(case: Case) {
    let Case {
        spec,
        commits,
        expected,
    } = case;
    let key = spec.primary_key.clone();
    let java_table = Table::create_with_java(spec.clone());
    for commit in &commits {
        java_table.java_write(commit);
    }
    let reference = java_table.java_read(None);
    if let Some(expected) = &expected {
        assert_same_rows(
            "Java's table: expected vs Java read",
            expected,
            &reference,
            &key,
        );
    }
    let table = Table::create(spec, Creator::Lakejoin);
    for commit in &commits {
        table.lj_write(commit, Some(ROW_KIND));
    }
    let reads = [
        ("lakejoin's table read by Java", table.java_read(None)),
        (
            "lakejoin's table scanned by lakejoin",
            table.lj_scan(None, None),
        ),
        (
            "Java's table scanned by lakejoin",
            java_table.lj_scan(None, None),
        ),
    ];
    for (what, rows) in reads {
        assert_same_rows(
            &format!("{what}: Java's read of its own table (expected) vs this (actual)"),
            &reference,
            &rows,
            &key,
        );
    }
}

/// Java creates the table and writes the commits; lakejoin scans it (at the middle
/// snapshot too) and looks up every key written, present or not. Returns the table.
pub fn java_writes_lakejoin_reads(case: Case) -> Table {
    let Case {
        spec,
        commits,
        expected,
    } = case;
    let table = Table::create_with_java(spec);
    let ids: Vec<u64> = commits.iter().map(|c| table.java_write(c)).collect();
    let key = table.spec.primary_key.clone();
    let middle = ids[(ids.len() - 1) / 2];
    assert_same_rows(
        &format!("at snapshot {middle}: Java read (expected) vs lakejoin scan (actual)"),
        &table.java_read(Some(middle)),
        &table.lj_scan(Some(middle), None),
        &key,
    );
    let rows = assert_java_and_lakejoin_read(&table, "after every commit", expected.as_deref());
    let key_value = |row: &Value| -> Value {
        let mut object = Map::new();
        for column in &key {
            object.insert(column.clone(), row[column].clone());
        }
        Value::Object(object)
    };
    let mut present = BTreeMap::new();
    for row in &rows {
        present.insert(key_of(row, &key), row.clone());
    }
    let mut written: Vec<Value> = commits.iter().flatten().map(key_value).collect();
    // A key no commit wrote: the first written key with another id.
    let mut unknown = written[0].clone();
    unknown["id"] = json!(987_654);
    written.push(unknown);
    let mut looked_up = BTreeSet::new();
    for lookup_key in written {
        let text = key_of(&lookup_key, &key);
        if !looked_up.insert(text.clone()) {
            continue;
        }
        assert_eq!(
            table.lj_get(&lookup_key),
            present.get(&text).cloned(),
            "lakejoin table get {lookup_key} (left) vs Java's row (right)"
        );
    }
    table
}
