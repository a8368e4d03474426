//! `lakejoin table …`: the table commands other tools script against.

use std::collections::BTreeMap;
use std::io::{BufRead, Write};
use std::sync::Arc;

use clap::{Args, Subcommand};

use super::Outcome;
use crate::codec::json::{row_from_json, row_to_json};
use crate::error::{Error, Result};
use crate::lsm::changes::read_changes;
use crate::lsm::compact::{CompactScope, Compactor};
use crate::lsm::expire::{ExpireConfig, expire_snapshots};
use crate::lsm::orphan::{OrphanCleanConfig, clean_orphan_files};
use crate::lsm::point_lookup::{LookupOptions, PointLookup};
use crate::lsm::reader::{ScanFilter, scan_with_kinds};
use crate::lsm::writer::TableWriter;
use crate::table::check::check_snapshot;
use crate::table::datum::{Row, datum_from_json};
use crate::table::options::MergeEngineKind;
use crate::table::row_kind::RowKind;
use crate::table::schema::TableSchema;
use crate::table::types::DataType;
use crate::table::{Table, TableIdentifier, Warehouse};

/// Where the table is.
#[derive(Debug, Args)]
pub(crate) struct TableLocation {
    /// Warehouse URI: file:///dir, a directory, memory://, s3://bucket/prefix.
    #[arg(long)]
    pub(crate) warehouse: String,
    /// Table as <database>.<table>.
    #[arg(long)]
    pub(crate) table: String,
    /// object_store option for the warehouse (e.g. aws_endpoint=http://…), repeatable.
    /// AWS_* environment variables are used too.
    #[arg(long = "store-option", value_name = "KEY=VALUE")]
    pub(crate) store_options: Vec<String>,
}

#[derive(Debug, Subcommand)]
pub(crate) enum TableCommand {
    /// Create a primary-key table.
    Create {
        #[command(flatten)]
        location: TableLocation,
        /// Column as name:TYPE (e.g. id:INT, price:DECIMAL(10,2), name:STRING NOT NULL).
        #[arg(long = "column", required = true, value_name = "NAME:TYPE")]
        columns: Vec<String>,
        /// Primary-key columns (comma-separated or repeated).
        #[arg(long = "primary-key", required = true, value_delimiter = ',')]
        primary_key: Vec<String>,
        /// Partition columns (comma-separated or repeated); they must be in the primary key.
        #[arg(long = "partition-by", value_delimiter = ',')]
        partition_by: Vec<String>,
        /// Fixed number of buckets.
        #[arg(long)]
        buckets: i32,
        /// deduplicate (default), partial-update, aggregation or first-row; engine options
        /// (`fields.<f>.aggregate-function=sum`, …) go in --option.
        #[arg(long = "merge-engine")]
        merge_engine: Option<String>,
        /// Columns ordering versions of a key (comma-separated).
        #[arg(long = "sequence-field", value_delimiter = ',')]
        sequence_field: Vec<String>,
        /// Further Paimon table option, repeatable.
        #[arg(long = "option", value_name = "KEY=VALUE")]
        options: Vec<String>,
    },
    /// Write JSON lines from stdin as one commit.
    Write {
        #[command(flatten)]
        location: TableLocation,
        /// Member holding the row kind (+I, -U, +U, -D); not stored.
        #[arg(long = "row-kind-field")]
        row_kind_field: Option<String>,
    },
    /// Print the table's rows as JSON lines, sorted by primary key.
    Scan {
        #[command(flatten)]
        location: TableLocation,
        /// Read this snapshot instead of the latest (time travel).
        #[arg(long)]
        snapshot: Option<i64>,
        /// Equality filter col=value, repeatable.
        #[arg(long = "where", value_name = "COL=VALUE")]
        filters: Vec<String>,
        /// Add a `rowkind` column (+I, -U, +U, -D) first, as Paimon's `$audit_log` table.
        #[arg(long = "audit-log")]
        audit_log: bool,
        /// Print the changes made after this snapshot instead of the rows (0: from the
        /// start), from the changelog when the table has a changelog producer, else from
        /// the commits' delta files; each change has its `rowkind`.
        #[arg(long = "from-snapshot", conflicts_with = "snapshot")]
        from_snapshot: Option<i64>,
        /// The last snapshot whose changes `--from-snapshot` prints (default: the latest).
        #[arg(long = "to-snapshot", requires = "from_snapshot")]
        to_snapshot: Option<i64>,
    },
    /// Print the current row of one primary key as a JSON line; exit 1 when absent.
    Get {
        #[command(flatten)]
        location: TableLocation,
        /// The primary key as a JSON object, e.g. '{"id":1}' (partition keys included).
        #[arg(long)]
        key: String,
    },
    /// Print the table's snapshots as JSON lines.
    Snapshots {
        #[command(flatten)]
        location: TableLocation,
    },
    /// Compact the table: Paimon's universal picker on every bucket, or --full.
    Compact {
        #[command(flatten)]
        location: TableLocation,
        /// Rewrite every bucket into one sorted run on the highest level.
        #[arg(long)]
        full: bool,
    },
    /// Expire old snapshots and delete the files only they reference.
    Expire {
        #[command(flatten)]
        location: TableLocation,
        /// Keep at most this many snapshots (default: `snapshot.num-retained.max`).
        #[arg(long = "retain-max")]
        retain_max: Option<usize>,
        /// Keep at least this many snapshots (default: `snapshot.num-retained.min`).
        #[arg(long = "retain-min")]
        retain_min: Option<usize>,
        /// Keep snapshots younger than this, e.g. 30s, 5 min, 1h, 2 d
        /// (default: `snapshot.time-retained`).
        #[arg(long = "older-than", value_name = "DURATION", value_parser = super::parse_duration)]
        older_than: Option<std::time::Duration>,
    },
    /// Check that every file a snapshot references exists, has its recorded size and
    /// parses; print each problem as `<path>: <problem>`; exit 1 if there is any.
    Check {
        #[command(flatten)]
        location: TableLocation,
        /// Check this snapshot instead of the latest.
        #[arg(long)]
        snapshot: Option<i64>,
    },
    /// Evolve the table's schema as Paimon's ALTER TABLE does, in one new schema file:
    /// add nullable columns at the end, widen column types (INT → BIGINT, VARCHAR(n) →
    /// longer, DECIMAL precision up). Old data files read an added column as null.
    /// Prints the new schema.
    Alter {
        #[command(flatten)]
        location: TableLocation,
        /// A column to add, 'NAME TYPE' (e.g. 'city STRING'), repeatable.
        #[arg(long = "add-column", value_name = "NAME TYPE")]
        add_columns: Vec<String>,
        /// A column's wider type, 'NAME TYPE' (e.g. 'age BIGINT'), repeatable.
        #[arg(long = "widen", value_name = "NAME TYPE")]
        widen: Vec<String>,
    },
    /// Remove files no snapshot references (left by failed writes), printing each one.
    CleanOrphans {
        #[command(flatten)]
        location: TableLocation,
        /// Only remove files older than this, e.g. 1d, 12h, 30 min.
        #[arg(
            long = "older-than",
            value_name = "DURATION",
            default_value = "1d",
            value_parser = super::parse_duration
        )]
        older_than: std::time::Duration,
        /// Print what would be removed without removing it.
        #[arg(long = "dry-run")]
        dry_run: bool,
    },
}

fn parse_pairs(pairs: &[String], what: &str) -> Result<BTreeMap<String, String>> {
    let mut map = BTreeMap::new();
    let mut problems = Vec::new();
    for p in pairs {
        match p.split_once('=') {
            Some((k, v)) if !k.trim().is_empty() => {
                map.insert(k.trim().to_string(), v.to_string());
            }
            _ => problems.push(format!("{what} `{p}` must be KEY=VALUE")),
        }
    }
    if problems.is_empty() {
        Ok(map)
    } else {
        Err(Error::Config(problems.join("; ")))
    }
}

impl TableLocation {
    fn warehouse(&self) -> Result<Warehouse> {
        let mut options: BTreeMap<String, String> = std::env::vars()
            .filter(|(k, _)| k.starts_with("AWS_"))
            .map(|(k, v)| (k.to_ascii_lowercase(), v))
            .collect();
        options.extend(parse_pairs(&self.store_options, "--store-option")?);
        Warehouse::from_uri(&self.warehouse, &options)
    }

    fn identifier(&self) -> Result<TableIdentifier> {
        TableIdentifier::parse(&self.table)
    }

    pub(super) async fn open(&self) -> Result<Table> {
        Table::open(&self.warehouse()?, &self.identifier()?).await
    }
}

impl TableCommand {
    pub(crate) async fn run(self) -> Result<Outcome> {
        match self {
            TableCommand::Create {
                location,
                columns,
                primary_key,
                partition_by,
                buckets,
                merge_engine,
                sequence_field,
                options,
            } => {
                create(
                    &location,
                    &columns,
                    primary_key,
                    partition_by,
                    buckets,
                    merge_engine,
                    sequence_field,
                    &options,
                )
                .await
            }
            TableCommand::Write {
                location,
                row_kind_field,
            } => write(&location, row_kind_field.as_deref()).await,
            TableCommand::Scan {
                location,
                snapshot,
                filters,
                audit_log,
                from_snapshot,
                to_snapshot,
            } => {
                let read = match from_snapshot {
                    Some(from) => ScanRead::Changes {
                        from,
                        to: to_snapshot,
                    },
                    None => ScanRead::Rows {
                        snapshot,
                        audit_log,
                    },
                };
                scan_command(&location, read, &filters).await
            }
            TableCommand::Get { location, key } => get(&location, &key).await,
            TableCommand::Snapshots { location } => snapshots(&location).await,
            TableCommand::Compact { location, full } => compact(&location, full).await,
            TableCommand::Expire {
                location,
                retain_max,
                retain_min,
                older_than,
            } => expire(&location, retain_max, retain_min, older_than).await,
            TableCommand::CleanOrphans {
                location,
                older_than,
                dry_run,
            } => clean_orphans(&location, older_than, dry_run).await,
            TableCommand::Check { location, snapshot } => check(&location, snapshot).await,
            TableCommand::Alter {
                location,
                add_columns,
                widen,
            } => super::table_alter::alter(&location, &add_columns, &widen).await,
        }
    }
}

#[allow(clippy::too_many_arguments)]
async fn create(
    location: &TableLocation,
    columns: &[String],
    primary_key: Vec<String>,
    partition_by: Vec<String>,
    buckets: i32,
    merge_engine: Option<String>,
    sequence_field: Vec<String>,
    options: &[String],
) -> Result<Outcome> {
    let mut problems = Vec::new();
    let mut parsed = Vec::new();
    for c in columns {
        match c.split_once(':') {
            Some((name, ty)) if !name.trim().is_empty() => match DataType::parse(ty) {
                Ok((data_type, nullable)) => {
                    parsed.push((name.trim().to_string(), data_type, nullable))
                }
                Err(e) => problems.push(format!("--column {c}: {e}")),
            },
            _ => problems.push(format!("--column `{c}` must be NAME:TYPE")),
        }
    }
    if buckets < 1 {
        problems.push(format!("--buckets must be ≥ 1, got {buckets}"));
    }
    let mut table_options = match parse_pairs(options, "--option") {
        Ok(m) => m,
        Err(e) => {
            problems.push(e.to_string());
            BTreeMap::new()
        }
    };
    table_options.insert("bucket".into(), buckets.to_string());
    if let Some(engine) = merge_engine {
        if MergeEngineKind::parse(&engine).is_none() {
            problems.push(format!(
                "--merge-engine must be deduplicate, partial-update, aggregation or first-row, \
                 got `{engine}`"
            ));
        }
        table_options.insert("merge-engine".into(), engine);
    }
    if !sequence_field.is_empty() {
        for f in &sequence_field {
            if !parsed.iter().any(|(n, _, _)| n == f) {
                problems.push(format!("--sequence-field `{f}` is not a column"));
            }
        }
        table_options.insert("sequence.field".into(), sequence_field.join(","));
    }
    let primary_key: Vec<String> = primary_key
        .into_iter()
        .map(|s| s.trim().to_string())
        .collect();
    let partition_by: Vec<String> = partition_by
        .into_iter()
        .map(|s| s.trim().to_string())
        .collect();
    let schema = TableSchema::new(parsed, partition_by, primary_key, table_options);
    if let Err(e) = &schema {
        problems.push(e.to_string());
    }
    if !problems.is_empty() {
        return Err(Error::Config(problems.join("\n")));
    }
    let schema = schema?;
    // Fail on engine options lakejoin cannot honour before anything is written.
    let table_options = crate::table::options::TableOptions::from_map(&schema.options)?;
    crate::lsm::merge::MergeEngine::new(&schema, &table_options)?;
    crate::lsm::merge::SequenceOrder::new(&schema, &table_options)?;
    let identifier = location.identifier()?;
    crate::lsm::create_table(&location.warehouse()?, &identifier, schema).await?;
    eprintln!("created table {identifier}");
    Ok(Outcome::Success)
}

/// `table check`: problems on stdout (one per line, so scripts can read them), the
/// summary on stderr.
async fn check(location: &TableLocation, snapshot: Option<i64>) -> Result<Outcome> {
    let table = location.open().await?;
    let report = check_snapshot(&table, snapshot).await?;
    let mut out = std::io::stdout().lock();
    for p in &report.problems {
        writeln!(out, "{}: {}", p.path, p.problem).map_err(|e| Error::Io {
            context: "writing stdout".into(),
            source: e,
        })?;
    }
    let identifier = table.identifier();
    match report.snapshot_id {
        None => eprintln!("{identifier} has no snapshot: nothing to check"),
        Some(id) if report.is_ok() => eprintln!(
            "{identifier} snapshot {id}: {} files checked, no problem",
            report.files_checked
        ),
        Some(id) => eprintln!(
            "{identifier} snapshot {id}: {} files checked, {} problems",
            report.files_checked,
            report.problems.len()
        ),
    }
    Ok(if report.is_ok() {
        Outcome::Success
    } else {
        Outcome::Problems
    })
}

/// Lines with errors shown before the rest are only counted.
const MAX_REPORTED_LINES: usize = 50;

async fn write(location: &TableLocation, row_kind_field: Option<&str>) -> Result<Outcome> {
    let table = Arc::new(location.open().await?);
    let schema = table.schema().clone();
    let mut writer = TableWriter::new(
        table.clone(),
        format!("lakejoin-cli-{}", uuid::Uuid::new_v4()),
    )
    .await?;
    writer.set_batch_write();
    let stdin = std::io::stdin();
    let mut problems = Vec::new();
    let mut bad_lines = 0usize;
    let mut rows = 0usize;
    for (index, line) in stdin.lock().lines().enumerate() {
        let line_no = index + 1;
        let line = line.map_err(|e| Error::Io {
            context: format!("reading stdin line {line_no}"),
            source: e,
        })?;
        if line.trim().is_empty() {
            continue;
        }
        let result = serde_json::from_str::<serde_json::Value>(&line)
            .map_err(|e| format!("malformed JSON: {e}"))
            .and_then(|v| row_from_json(&schema, &v, row_kind_field).map_err(|e| e.to_string()))
            .and_then(|(kind, row)| writer.write(kind, row).map_err(|e| e.to_string()));
        match result {
            Ok(()) => rows += 1,
            Err(reason) => {
                bad_lines += 1;
                if problems.len() < MAX_REPORTED_LINES {
                    problems.push(format!("line {line_no}: {reason}"));
                }
            }
        }
    }
    if bad_lines > 0 {
        let mut message = problems.join("\n");
        if bad_lines > problems.len() {
            message.push_str(&format!(
                "\n… and {} more bad lines",
                bad_lines - problems.len()
            ));
        }
        message.push_str(&format!("\n{bad_lines} bad line(s); nothing was committed"));
        return Err(Error::Data(message));
    }
    match writer.commit(BTreeMap::new()).await? {
        Some(s) => eprintln!("committed snapshot {} with {rows} row(s)", s.id),
        None => eprintln!("no rows; nothing committed"),
    }
    // Let compaction the commit made due finish before the process exits.
    if let Err(e) = writer.close().await {
        eprintln!("warning: {e}; the committed data is intact");
    }
    Ok(Outcome::Success)
}

/// What `table scan` reads.
enum ScanRead {
    /// The merged rows of a snapshot (the latest by default), with their kinds when
    /// `audit_log`.
    Rows {
        snapshot: Option<i64>,
        audit_log: bool,
    },
    /// The changes of the snapshots after `from` up to `to` (the latest by default).
    Changes { from: i64, to: Option<i64> },
}

async fn scan_command(
    location: &TableLocation,
    read: ScanRead,
    filters: &[String],
) -> Result<Outcome> {
    let table = location.open().await?;
    let schema = table.schema().clone();
    let mut filter = ScanFilter::default();
    let mut problems = Vec::new();
    for (col, text) in parse_pairs(filters, "--where")? {
        let Some(index) = schema.field_index(&col) else {
            problems.push(format!("--where: `{col}` is not a column"));
            continue;
        };
        let ty = schema.fields[index].data_type;
        // Accept `id=3` and `id="3"` alike: try the text as JSON, then as a string.
        let value = serde_json::from_str::<serde_json::Value>(&text)
            .ok()
            .and_then(|v| datum_from_json(&v, &ty).ok())
            .map(Ok)
            .unwrap_or_else(|| datum_from_json(&serde_json::Value::String(text.clone()), &ty));
        match value {
            Ok(v) => filter.equals.push((index, v)),
            Err(e) => problems.push(format!("--where {col}={text}: {e}")),
        }
    }
    if !problems.is_empty() {
        return Err(Error::Config(problems.join("\n")));
    }
    let (rows, with_kind): (Vec<(RowKind, Row)>, bool) = match read {
        ScanRead::Rows {
            snapshot,
            audit_log,
        } => {
            let snapshot = match snapshot {
                Some(id) => Some(table.snapshot(id).await?),
                None => None,
            };
            (
                scan_with_kinds(&table, snapshot.as_ref(), &filter).await?,
                audit_log,
            )
        }
        ScanRead::Changes { from, to } => {
            let to = match to {
                Some(to) => to,
                None => table.latest_snapshot_id().await?.unwrap_or(0),
            };
            let changes = read_changes(&table, from, to).await?;
            let rows = changes
                .into_iter()
                .filter(|c| filter.matches(&c.row))
                .map(|c| (c.kind, c.row))
                .collect();
            (rows, true)
        }
    };
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
    for (kind, row) in &rows {
        let json = row_to_json(&schema, row);
        if with_kind {
            writeln!(out, "{}", with_row_kind(*kind, json)).map_err(stdout_error)?;
        } else {
            writeln!(out, "{json}").map_err(stdout_error)?;
        }
    }
    out.flush().map_err(stdout_error)?;
    Ok(Outcome::Success)
}

/// A row's JSON object with `rowkind` (`+I`, `-U`, `+U`, `-D`) added first, the column
/// Paimon's `$audit_log` table puts before the table's.
fn with_row_kind(kind: RowKind, row: serde_json::Value) -> serde_json::Value {
    let mut object = serde_json::Map::new();
    object.insert(
        "rowkind".into(),
        serde_json::Value::String(kind.short_string().into()),
    );
    if let serde_json::Value::Object(columns) = row {
        object.extend(columns);
    }
    serde_json::Value::Object(object)
}

async fn get(location: &TableLocation, key: &str) -> Result<Outcome> {
    let table = Arc::new(location.open().await?);
    let schema = table.schema().clone();
    let value: serde_json::Value = serde_json::from_str(key)
        .map_err(|e| Error::Config(format!("--key is not valid JSON: {e}")))?;
    let serde_json::Value::Object(object) = &value else {
        return Err(Error::Config(format!(
            "--key must be a JSON object, got {value}"
        )));
    };
    let mut problems = Vec::new();
    for name in object.keys() {
        if !schema.primary_keys.contains(name) {
            problems.push(format!(
                "--key: `{name}` is not a primary-key column ({})",
                schema.primary_keys.join(", ")
            ));
        }
    }
    let mut values = Vec::with_capacity(schema.primary_keys.len());
    for name in &schema.primary_keys {
        let Some(field) = schema.field(name) else {
            continue;
        };
        match object.get(name) {
            None | Some(serde_json::Value::Null) => {
                problems.push(format!("--key: primary-key column `{name}` is missing"))
            }
            Some(v) => match datum_from_json(v, &field.data_type) {
                Ok(d) => values.push(d),
                Err(e) => problems.push(format!("--key: column `{name}`: {e}")),
            },
        }
    }
    if !problems.is_empty() {
        return Err(Error::Config(problems.join("\n")));
    }
    let lookup = PointLookup::open(table, LookupOptions::default()).await?;
    match lookup.get(&values).await? {
        Some(row) => {
            println!("{}", row_to_json(&schema, &row));
            Ok(Outcome::Success)
        }
        None => Ok(Outcome::NotFound),
    }
}

async fn snapshots(location: &TableLocation) -> Result<Outcome> {
    let table = location.open().await?;
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
    for id in table.snapshot_ids().await? {
        let s = table.snapshot(id).await?;
        let line = serde_json::json!({
            "id": s.id,
            "schemaId": s.schema_id,
            "commitUser": s.commit_user,
            "commitIdentifier": s.commit_identifier,
            "commitKind": s.commit_kind,
            "timeMillis": s.time_millis,
            "totalRecordCount": s.total_record_count,
            "deltaRecordCount": s.delta_record_count,
            "properties": s.properties.clone().unwrap_or_default(),
        });
        writeln!(out, "{line}").map_err(stdout_error)?;
    }
    out.flush().map_err(stdout_error)?;
    Ok(Outcome::Success)
}

async fn compact(location: &TableLocation, full: bool) -> Result<Outcome> {
    let table = Arc::new(location.open().await?);
    let user = format!("lakejoin-compact-{}", uuid::Uuid::new_v4());
    let scope = if full {
        CompactScope::full()
    } else {
        CompactScope::all()
    };
    let report = Compactor::new(table, user)?.compact(&scope).await?;
    match &report.snapshot {
        Some(s) => eprintln!(
            "committed COMPACT snapshot {}: {} bucket(s), {} file(s) rewritten into {} ({} \
             copied without a merge), {} moved up a level",
            s.id,
            report.buckets_compacted,
            report.files_rewritten,
            report.files_written,
            report.files_copied,
            report.files_upgraded
        ),
        None if full => eprintln!("table is already compact; nothing committed"),
        None => eprintln!("no bucket needs compaction; nothing committed"),
    }
    Ok(Outcome::Success)
}

async fn expire(
    location: &TableLocation,
    retain_max: Option<usize>,
    retain_min: Option<usize>,
    older_than: Option<std::time::Duration>,
) -> Result<Outcome> {
    let table = location.open().await?;
    let mut config = ExpireConfig::from_options(&table.options().maintenance);
    if let Some(n) = retain_max {
        config.retain_max = n;
        if retain_min.is_none() {
            // An explicit maximum below the table's minimum means "keep this many".
            config.retain_min = config.retain_min.min(n);
        }
    }
    if let Some(n) = retain_min {
        config.retain_min = n;
        if retain_max.is_none() {
            config.retain_max = config.retain_max.max(n);
        }
    }
    if let Some(older_than) = older_than {
        config.time_retained = older_than;
    }
    let report = expire_snapshots(&table, &config).await?;
    match (report.expired.first(), report.expired.last()) {
        (Some(first), Some(last)) => eprintln!(
            "expired snapshots {first}..={last}; deleted {} data file(s), {} manifest(s), \
             {} manifest list(s); earliest snapshot is now {}",
            report.data_files_deleted,
            report.manifests_deleted,
            report.manifest_lists_deleted,
            report.earliest.unwrap_or(last.saturating_add(1))
        ),
        _ => eprintln!("no snapshot to expire"),
    }
    Ok(Outcome::Success)
}

async fn clean_orphans(
    location: &TableLocation,
    older_than: std::time::Duration,
    dry_run: bool,
) -> Result<Outcome> {
    let table = location.open().await?;
    let config = OrphanCleanConfig {
        older_than,
        dry_run,
    };
    let report = clean_orphan_files(&table, &config).await?;
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
    for file in &report.removed {
        writeln!(out, "{}", file.path).map_err(stdout_error)?;
    }
    out.flush().map_err(stdout_error)?;
    let bytes: u64 = report.removed.iter().map(|f| f.size).sum();
    eprintln!(
        "{} {} orphan file(s) ({bytes} bytes); kept {} newer unreferenced file(s)",
        if dry_run { "would remove" } else { "removed" },
        report.removed.len(),
        report.too_recent.len()
    );
    Ok(Outcome::Success)
}

pub(super) fn stdout_error(e: std::io::Error) -> Error {
    Error::Io {
        context: "writing to stdout".into(),
        source: e,
    }
}
