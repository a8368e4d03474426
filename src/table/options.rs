//! Typed view of the Paimon table options lakejoin understands. Option names and defaults
//! are Paimon's own, so other engines reading the schema merge the same way.

use std::collections::BTreeMap;
use std::time::Duration;

use super::changelog_options::{self, ChangelogOptions};
use super::data_file::{DEFAULT_PAGE_BYTES, DEFAULT_PAGE_ROWS};
use crate::error::{Error, Result};

/// The default page limits as the Java ints the options are read as (both are small).
const DEFAULT_PAGE_ROWS_INT: i32 = DEFAULT_PAGE_ROWS as i32;
const DEFAULT_PAGE_BYTES_INT: i32 = DEFAULT_PAGE_BYTES as i32;

/// `merge-engine`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MergeEngineKind {
    Deduplicate,
    PartialUpdate,
    Aggregation,
    FirstRow,
}

impl MergeEngineKind {
    pub(crate) fn parse(text: &str) -> Option<Self> {
        match text {
            "deduplicate" => Some(Self::Deduplicate),
            "partial-update" => Some(Self::PartialUpdate),
            "aggregation" => Some(Self::Aggregation),
            "first-row" => Some(Self::FirstRow),
            _ => None,
        }
    }

    pub fn as_str(&self) -> &'static str {
        match self {
            Self::Deduplicate => "deduplicate",
            Self::PartialUpdate => "partial-update",
            Self::Aggregation => "aggregation",
            Self::FirstRow => "first-row",
        }
    }
}

/// Table options with Paimon's defaults applied.
#[derive(Debug, Clone, PartialEq)]
pub struct TableOptions {
    /// `bucket`: fixed bucket count (≥ 1), or -1 for dynamic-bucket tables (read only).
    pub bucket: i32,
    pub(crate) merge_engine: MergeEngineKind,
    /// `sequence.field`: columns ordering versions of a key.
    pub(crate) sequence_fields: Vec<String>,
    /// `sequence.field.sort-order` = descending flips the order of sequence values.
    pub(crate) sequence_descending: bool,
    /// `partial-update.ignore-delete` or `ignore-delete`.
    pub(crate) ignore_delete: bool,
    /// `partial-update.remove-record-on-delete`.
    pub(crate) remove_record_on_delete: bool,
    /// `aggregation.remove-record-on-delete`: a `-D` removes the key of an aggregation table.
    pub(crate) aggregation_remove_record_on_delete: bool,
    /// `partial-update.remove-record-on-sequence-group`: sequence fields whose group's `-D`
    /// removes the whole row.
    pub(crate) remove_record_on_sequence_group: Vec<String>,
    /// `fields.default-aggregate-function` (the name as written; the engine checks it).
    pub(crate) default_aggregate_function: Option<String>,
    /// `fields.<f>.…` options, by field name.
    pub(crate) field_options: BTreeMap<String, FieldOptions>,
    /// `fields.<s1,s2>.sequence-group = a,b`, in key order.
    pub(crate) sequence_groups: Vec<SequenceGroupOption>,
    /// Every `fields.<names>.<option>` key with the field names it mentions (Paimon
    /// requires them to be columns of the table).
    pub(crate) field_option_names: Vec<(String, Vec<String>)>,
    /// `partition.default-name`.
    pub(crate) partition_default_name: String,
    /// `file.format`.
    pub(crate) file_format: String,
    /// `file.compression`.
    pub(crate) file_compression: String,
    /// `file.compression.zstd-level`.
    pub(crate) zstd_level: i32,
    /// `parquet.page.row.count.limit` and `parquet.page.size`: a data page of a Parquet
    /// data file ends at whichever it reaches first, as in Java Paimon's writer. The
    /// defaults are lakejoin's (`data_file::DEFAULT_PAGE_ROWS`, `DEFAULT_PAGE_BYTES`).
    pub(crate) parquet_page_rows: usize,
    pub(crate) parquet_page_bytes: usize,
    /// `manifest.compression`.
    pub(crate) manifest_compression: String,
    /// `commit.max-retries`.
    pub(crate) commit_max_retries: u32,
    /// `target-file-size` in bytes (rolling is by estimated size).
    pub(crate) target_file_size: u64,
    /// `lookup.cache-max-memory-size` in bytes (256 mb): pages of the local lookup files
    /// that point lookups hold in memory.
    pub(crate) lookup_cache_max_memory_size: u64,
    /// LSM compaction and snapshot retention.
    pub maintenance: MaintenanceOptions,
    /// Changelog producer and changelog retention.
    pub changelog: ChangelogOptions,
}

/// Compaction and snapshot-retention options, named and defaulted as in Paimon's
/// `CoreOptions`.
#[derive(Debug, Clone, PartialEq)]
pub struct MaintenanceOptions {
    /// `num-sorted-run.compaction-trigger` (5): sorted runs of a bucket that trigger a
    /// compaction (each level-0 file is a run, each higher level one run).
    pub compaction_trigger: usize,
    /// `num-sorted-run.stop-trigger` (trigger + 3, at least the trigger): above this many
    /// runs a writer waits for compaction.
    pub stop_trigger: usize,
    /// `num-levels` (trigger + 1): levels 0..num-levels-1; full compaction writes the last.
    pub num_levels: usize,
    /// `compaction.max-size-amplification-percent` (200).
    pub(crate) max_size_amplification_percent: u64,
    /// `compaction.size-ratio` (1): percentage flexibility when comparing run sizes.
    pub(crate) size_ratio: u64,
    /// `compaction.force-up-level-0` (false): always compact level-0 files up.
    pub(crate) force_up_level_0: bool,
    /// `write-only` (false): writers never compact (a separate job does).
    pub(crate) write_only: bool,
    /// `deletion-vectors.enabled` (false).
    pub(crate) deletion_vectors: bool,
    /// `snapshot.num-retained.min` (10): never expire the newest this many snapshots.
    pub(crate) snapshot_retained_min: usize,
    /// `snapshot.num-retained.max` (Integer.MAX_VALUE): always expire beyond this many.
    pub(crate) snapshot_retained_max: usize,
    /// `snapshot.time-retained` (1 h): snapshots younger than this are kept (within the
    /// two counts above).
    pub(crate) snapshot_time_retained: Duration,
}

impl MaintenanceOptions {
    /// Batch reads (Java's and pypaimon's) skip level-0 files of first-row tables and of
    /// deletion-vector tables, so such tables must not keep data on level 0.
    pub(crate) fn needs_level0_compaction(&self, merge_engine: MergeEngineKind) -> bool {
        merge_engine == MergeEngineKind::FirstRow || self.deletion_vectors || self.force_up_level_0
    }
}

impl TableOptions {
    /// Whether batch reads skip level-0 files (Paimon's `batchScanSkipLevel0`: merge engine
    /// first-row, or deletion vectors enabled). lakejoin's reader follows the same rule so
    /// that it returns what Java and pypaimon return.
    pub fn batch_scan_skips_level0(&self) -> bool {
        self.merge_engine == MergeEngineKind::FirstRow || self.maintenance.deletion_vectors
    }

    /// Whether data written to level 0 must be compacted up right after each commit.
    pub(crate) fn force_up_level0(&self) -> bool {
        self.maintenance.needs_level0_compaction(self.merge_engine)
    }
}

impl TableOptions {
    /// Parses the options map of a schema; lists every invalid value at once.
    pub fn from_map(options: &BTreeMap<String, String>) -> Result<Self> {
        let mut problems = Vec::new();
        let get = |k: &str| options.get(k).map(|s| s.trim());
        let parse_bool = |k: &str, problems: &mut Vec<String>| parse_flag(k, get(k), problems);
        let ignore_delete = parse_bool("partial-update.ignore-delete", &mut problems)
            | parse_bool("ignore-delete", &mut problems)
            | parse_bool("first-row.ignore-delete", &mut problems)
            | parse_bool("deduplicate.ignore-delete", &mut problems);
        let remove_record_on_delete =
            parse_bool("partial-update.remove-record-on-delete", &mut problems);
        let aggregation_remove_record_on_delete =
            parse_bool("aggregation.remove-record-on-delete", &mut problems);
        let remove_record_on_sequence_group = get("partial-update.remove-record-on-sequence-group")
            .map(split_names)
            .unwrap_or_default();
        let fields = parse_field_options(options, &mut problems);
        let bucket = match get("bucket") {
            None => -1,
            Some(v) => v.parse::<i32>().unwrap_or_else(|_| {
                problems.push(format!("option `bucket` must be an integer, got `{v}`"));
                1
            }),
        };
        if bucket == 0 || bucket < -2 {
            problems.push(format!(
                "option `bucket` must be ≥ 1 (or -1 for dynamic), got {bucket}"
            ));
        }
        let merge_engine = match get("merge-engine") {
            None => MergeEngineKind::Deduplicate,
            Some(v) => MergeEngineKind::parse(v).unwrap_or_else(|| {
                problems.push(format!(
                    "option `merge-engine` must be deduplicate, partial-update, aggregation or first-row, got `{v}`"
                ));
                MergeEngineKind::Deduplicate
            }),
        };
        let sequence_fields: Vec<String> = get("sequence.field")
            .map(|v| {
                v.split(',')
                    .map(|s| s.trim().to_string())
                    .filter(|s| !s.is_empty())
                    .collect()
            })
            .unwrap_or_default();
        let sequence_descending = match get("sequence.field.sort-order") {
            None => false,
            Some(v) if v.eq_ignore_ascii_case("ascending") => false,
            Some(v) if v.eq_ignore_ascii_case("descending") => true,
            Some(v) => {
                problems.push(format!(
                    "option `sequence.field.sort-order` must be ascending or descending, got `{v}`"
                ));
                false
            }
        };
        let mut parse_num = |k: &str, default: u64| -> u64 {
            match get(k) {
                None => default,
                Some(v) => parse_size(v).unwrap_or_else(|| {
                    problems.push(format!("option `{k}` must be a number or size, got `{v}`"));
                    default
                }),
            }
        };
        let target_file_size = parse_num("target-file-size", 128 * 1024 * 1024);
        let lookup_cache_max_memory_size = parse_num("lookup.cache-max-memory-size", 256 << 20);
        // Java ints: a larger value is an error, never taken modulo 2^32.
        let mut java_int = |k: &str, default: i32| -> i32 {
            match get(k) {
                None => default,
                Some(v) => v
                    .parse::<i32>()
                    .ok()
                    .filter(|n| *n >= 0)
                    .unwrap_or_else(|| {
                        problems.push(format!(
                            "option `{k}` must be an integer from 0 to {}, got `{v}`",
                            i32::MAX
                        ));
                        default
                    }),
            }
        };
        let zstd_level = java_int("file.compression.zstd-level", 1);
        let page_rows = java_int("parquet.page.row.count.limit", DEFAULT_PAGE_ROWS_INT);
        let page_bytes = java_int("parquet.page.size", DEFAULT_PAGE_BYTES_INT);
        let commit_max_retries = u32::try_from(java_int("commit.max-retries", 10)).unwrap_or(0);
        // parquet-mr refuses a page limit below 1.
        let mut page_limit = |k: &str, n: i32| -> usize {
            if n == 0 {
                problems.push(format!("option `{k}` must be at least 1, got `0`"));
            }
            usize::try_from(n.max(1)).unwrap_or(1)
        };
        let parquet_page_rows = page_limit("parquet.page.row.count.limit", page_rows);
        let parquet_page_bytes = page_limit("parquet.page.size", page_bytes);
        let maintenance = parse_maintenance(options, &mut problems);
        let changelog = changelog_options::parse(
            options,
            &changelog_options::Defaults {
                merge_engine,
                snapshot_retained_min: maintenance.snapshot_retained_min,
                snapshot_retained_max: maintenance.snapshot_retained_max,
                snapshot_time_retained: maintenance.snapshot_time_retained,
            },
            &mut problems,
        );
        let options = TableOptions {
            bucket,
            merge_engine,
            sequence_fields,
            sequence_descending,
            ignore_delete,
            remove_record_on_delete,
            aggregation_remove_record_on_delete,
            remove_record_on_sequence_group,
            default_aggregate_function: fields.default_function,
            field_options: fields.by_field,
            sequence_groups: fields.groups,
            field_option_names: fields.names,
            partition_default_name: get("partition.default-name")
                .unwrap_or("__DEFAULT_PARTITION__")
                .to_string(),
            file_format: get("file.format").unwrap_or("parquet").to_ascii_lowercase(),
            file_compression: get("file.compression")
                .unwrap_or("zstd")
                .to_ascii_lowercase(),
            zstd_level,
            parquet_page_rows,
            parquet_page_bytes,
            manifest_compression: get("manifest.compression")
                .unwrap_or("zstd")
                .to_ascii_lowercase(),
            commit_max_retries,
            target_file_size,
            lookup_cache_max_memory_size,
            maintenance,
            changelog,
        };
        if problems.is_empty() {
            Ok(options)
        } else {
            Err(Error::Config(problems.join("; ")))
        }
    }
}

/// Options of one column (`fields.<f>.…`).
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct FieldOptions {
    /// `fields.<f>.aggregate-function` as written.
    pub(crate) aggregate_function: Option<String>,
    /// `fields.<f>.ignore-retract`: retractions leave this column unchanged.
    pub(crate) ignore_retract: bool,
    /// `fields.<f>.list-agg-delimiter` (default `,`), kept verbatim (a space is valid).
    pub(crate) list_agg_delimiter: Option<String>,
    /// `fields.<f>.distinct`: `listagg` skips tokens already present.
    pub(crate) distinct: bool,
}

/// `fields.<s1,s2>.sequence-group = a,b`: columns `a`, `b` are ordered by `s1`, `s2`.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct SequenceGroupOption {
    /// The option key, for messages.
    pub(crate) key: String,
    pub(crate) sequence_fields: Vec<String>,
    pub(crate) fields: Vec<String>,
}

const FIELDS_PREFIX: &str = "fields.";
const DEFAULT_AGGREGATE_FUNCTION: &str = "default-aggregate-function";

/// The `fields.` family of options, parsed.
#[derive(Default)]
struct ParsedFieldOptions {
    default_function: Option<String>,
    by_field: BTreeMap<String, FieldOptions>,
    groups: Vec<SequenceGroupOption>,
    names: Vec<(String, Vec<String>)>,
}

/// Paimon splits field lists on `,` without trimming; so does lakejoin, so that a table it
/// accepts also opens in Java.
fn split_names(text: &str) -> Vec<String> {
    text.split(',').map(str::to_string).collect()
}

fn parse_field_options(
    options: &BTreeMap<String, String>,
    problems: &mut Vec<String>,
) -> ParsedFieldOptions {
    let mut parsed = ParsedFieldOptions::default();
    for (key, value) in options {
        let Some(rest) = key.strip_prefix(FIELDS_PREFIX) else {
            continue;
        };
        if rest == DEFAULT_AGGREGATE_FUNCTION {
            parsed.default_function = Some(value.trim().to_string());
            continue;
        }
        // The suffixes lakejoin understands; any other `fields.<f>.<x>` (nested-key, …)
        // still names a field, which must exist (Paimon's validateFieldsPrefix).
        let suffixes = [
            ".aggregate-function",
            ".ignore-retract",
            ".list-agg-delimiter",
            ".distinct",
            ".sequence-group",
        ];
        let Some((field_part, suffix)) = suffixes
            .iter()
            .find_map(|s| rest.strip_suffix(s).map(|f| (f, *s)))
            .or_else(|| rest.split_once('.').map(|(f, _)| (f, "")))
        else {
            problems.push(format!(
                "option `{key}` must have the form fields.<field>.<option>"
            ));
            continue;
        };
        let names = split_names(field_part);
        parsed.names.push((key.clone(), names.clone()));
        let bool_value = |problems: &mut Vec<String>| parse_flag(key, Some(value.trim()), problems);
        match suffix {
            ".sequence-group" => parsed.groups.push(SequenceGroupOption {
                key: key.clone(),
                sequence_fields: names,
                fields: split_names(value),
            }),
            "" => {}
            _ => {
                let entry = parsed.by_field.entry(field_part.to_string()).or_default();
                match suffix {
                    ".aggregate-function" => {
                        entry.aggregate_function = Some(value.trim().to_string())
                    }
                    ".ignore-retract" => entry.ignore_retract = bool_value(problems),
                    ".list-agg-delimiter" => entry.list_agg_delimiter = Some(value.clone()),
                    _ => entry.distinct = bool_value(problems),
                }
            }
        }
    }
    parsed
}

/// The trimmed `value` of the boolean option `key`: `true` or `false` in any case, false
/// when absent; anything else is added to `problems` (and read as false).
fn parse_flag(key: &str, value: Option<&str>, problems: &mut Vec<String>) -> bool {
    match value {
        None => false,
        Some(v) if v.eq_ignore_ascii_case("true") => true,
        Some(v) if v.eq_ignore_ascii_case("false") => false,
        Some(v) => {
            problems.push(format!("option `{key}` must be true or false, got `{v}`"));
            false
        }
    }
}

/// Reads the compaction and retention options, adding any invalid value to `problems`.
fn parse_maintenance(
    options: &BTreeMap<String, String>,
    problems: &mut Vec<String>,
) -> MaintenanceOptions {
    let get = |k: &str| options.get(k).map(|s| s.trim());
    let mut int = |k: &str, default: u64, min: u64| -> u64 {
        match get(k) {
            None => default,
            Some(v) => match v.parse::<u64>() {
                Ok(n) if n >= min => n,
                _ => {
                    problems.push(format!(
                        "option `{k}` must be an integer ≥ {min}, got `{v}`"
                    ));
                    default
                }
            },
        }
    };
    // Java's options are ints; clamp to that range so arithmetic below cannot overflow.
    let java_int = |n: u64| n.min(i32::MAX as u64) as usize;
    let trigger = java_int(int("num-sorted-run.compaction-trigger", 5, 1));
    let stop = options
        .get("num-sorted-run.stop-trigger")
        .map(|_| java_int(int("num-sorted-run.stop-trigger", 0, 1)))
        .unwrap_or(trigger.saturating_add(3))
        .max(trigger);
    let num_levels = options
        .get("num-levels")
        .map(|_| java_int(int("num-levels", 0, 2)))
        .unwrap_or(trigger.saturating_add(1));
    let max_size_amplification_percent = int("compaction.max-size-amplification-percent", 200, 0);
    let size_ratio = int("compaction.size-ratio", 1, 0);
    let retained_min = java_int(int("snapshot.num-retained.min", 10, 1));
    let retained_max = java_int(int("snapshot.num-retained.max", i32::MAX as u64, 1));
    if retained_max < retained_min {
        problems.push(format!(
            "option `snapshot.num-retained.max` ({retained_max}) must not be below \
             `snapshot.num-retained.min` ({retained_min})"
        ));
    }
    let time_retained = match get("snapshot.time-retained") {
        None => Duration::from_secs(3600),
        Some(v) => parse_duration(v).unwrap_or_else(|e| {
            problems.push(format!("option `snapshot.time-retained`: {e}"));
            Duration::from_secs(3600)
        }),
    };
    let mut flag = |k: &str| parse_flag(k, get(k), problems);
    MaintenanceOptions {
        compaction_trigger: trigger,
        stop_trigger: stop,
        num_levels,
        max_size_amplification_percent,
        size_ratio,
        force_up_level_0: flag("compaction.force-up-level-0"),
        write_only: flag("write-only"),
        deletion_vectors: flag("deletion-vectors.enabled"),
        snapshot_retained_min: retained_min,
        snapshot_retained_max: retained_max,
        snapshot_time_retained: time_retained,
    }
}

/// Why a text is not a duration; the caller names the option or argument it came from.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum DurationError {
    /// No leading number.
    #[error("`{0}` is not a duration (use e.g. 30s, 5 min, 1h, 2 d)")]
    NotADuration(String),
    /// Digits only, but more than a u64 holds.
    #[error("`{text}`: the number is too large")]
    NumberTooLarge {
        text: String,
        #[source]
        source: std::num::ParseIntError,
    },
    /// A bare number where a unit is required ([`parse_duration_with_unit`]).
    #[error("`{text}` has no unit (use ns, us, ms, s, min, h, d, e.g. {text}s)")]
    NoUnit { text: String },
    #[error("`{text}`: unknown time unit `{unit}` (use ms, s, min, h or d)")]
    UnknownUnit { text: String, unit: String },
    /// More nanoseconds than a u64 holds.
    #[error("`{0}` is too long a duration")]
    TooLong(String),
}

/// Parses a duration as Paimon writes them in table options: a number and a unit,
/// optionally separated by spaces: `30s`, `5 min`, `1h`, `2 d`, `500 ms`, `1 day`. A bare
/// number is milliseconds, as in Paimon's `TimeUtils.parseDuration`, so that a table Java
/// wrote reads the same. lakejoin's own config and command line require the unit
/// ([`parse_duration_with_unit`]).
pub(crate) fn parse_duration(text: &str) -> std::result::Result<Duration, DurationError> {
    parse_duration_unit(text, true)
}

/// [`parse_duration`], but a number without a unit is an error: in lakejoin's config and
/// on its command line `10` was read as 10 ms where 10 s was meant.
pub(crate) fn parse_duration_with_unit(text: &str) -> std::result::Result<Duration, DurationError> {
    parse_duration_unit(text, false)
}

fn parse_duration_unit(
    text: &str,
    bare_is_millis: bool,
) -> std::result::Result<Duration, DurationError> {
    let t = text.trim();
    let digits_end = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    if digits_end == 0 {
        return Err(DurationError::NotADuration(text.to_string()));
    }
    let number: u64 = t[..digits_end]
        .parse()
        .map_err(|source| DurationError::NumberTooLarge {
            text: text.to_string(),
            source,
        })?;
    let unit = t[digits_end..].trim().to_ascii_lowercase();
    if unit.is_empty() && !bare_is_millis {
        // All digits here, so `t` is the number the hint suggests a unit for.
        return Err(DurationError::NoUnit {
            text: t.to_string(),
        });
    }
    let nanos_per_unit: u64 = match unit.as_str() {
        "ns" | "nano" | "nanos" | "nanosecond" | "nanoseconds" => 1,
        "us" | "µs" | "micro" | "micros" | "microsecond" | "microseconds" => 1_000,
        "" | "ms" | "milli" | "millis" | "millisecond" | "milliseconds" => 1_000_000,
        "s" | "sec" | "secs" | "second" | "seconds" => 1_000_000_000,
        "m" | "min" | "mins" | "minute" | "minutes" => 60_000_000_000,
        "h" | "hour" | "hours" => 3_600_000_000_000,
        "d" | "day" | "days" => 86_400_000_000_000,
        other => {
            return Err(DurationError::UnknownUnit {
                text: text.to_string(),
                unit: other.to_string(),
            });
        }
    };
    number
        .checked_mul(nanos_per_unit)
        .map(Duration::from_nanos)
        .ok_or_else(|| DurationError::TooLong(text.to_string()))
}

/// Parses `128`, `128 b`, `64kb`, `128 mb`, `1gb` (Paimon's MemorySize spelling).
fn parse_size(text: &str) -> Option<u64> {
    let t = text.trim().to_ascii_lowercase();
    let digits_end = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let number: u64 = t[..digits_end].parse().ok()?;
    let unit = t[digits_end..].trim();
    let factor = match unit {
        "" | "b" | "bytes" => 1,
        "k" | "kb" | "kib" => 1 << 10,
        "m" | "mb" | "mib" => 1 << 20,
        "g" | "gb" | "gib" => 1 << 30,
        _ => return None,
    };
    number.checked_mul(factor)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    /// Asserts that `options` are refused with one error naming each of `needles`.
    fn assert_refused(options: &[(&str, &str)], needles: &[&str]) {
        let err = TableOptions::from_map(&map(options))
            .unwrap_err()
            .to_string();
        for needle in needles {
            assert!(err.contains(needle), "missing {needle:?} in {err}");
        }
    }

    #[test]
    fn defaults_are_paimons() {
        let o = TableOptions::from_map(&map(&[("bucket", "4")])).unwrap();
        assert_eq!(o.bucket, 4);
        assert_eq!(o.merge_engine, MergeEngineKind::Deduplicate);
        assert_eq!(o.partition_default_name, "__DEFAULT_PARTITION__");
        assert_eq!(o.target_file_size, 128 << 20);
        assert_eq!(o.lookup_cache_max_memory_size, 256 << 20);
        assert_eq!(o.commit_max_retries, 10);
    }

    #[test]
    fn reports_every_bad_option() {
        assert_refused(
            &[
                ("bucket", "x"),
                ("merge-engine", "newest"),
                ("partial-update.ignore-delete", "maybe"),
                ("lookup.cache-max-memory-size", "lots"),
            ],
            &[
                "`bucket`",
                "`merge-engine`",
                "ignore-delete",
                "`lookup.cache-max-memory-size`",
            ],
        );
        assert_eq!(parse_size("128 mb"), Some(128 << 20));
        let o = TableOptions::from_map(&map(&[("lookup.cache-max-memory-size", "64 mb")]));
        assert_eq!(o.unwrap().lookup_cache_max_memory_size, 64 << 20);
    }

    #[test]
    fn integer_options_out_of_javas_int_range_are_errors() {
        // Java's `commit.max-retries` and `file.compression.zstd-level` are ints; a value
        // beyond one was taken modulo 2^32 (4294967295 retries became "failed after 0
        // attempts", 4294967297 became zstd level 1).
        for (key, value) in [
            ("commit.max-retries", "4294967295"),
            ("commit.max-retries", "2147483648"),
            ("commit.max-retries", "18446744073709551615"),
            ("file.compression.zstd-level", "4294967297"),
            ("file.compression.zstd-level", "2147483648"),
        ] {
            let err = TableOptions::from_map(&map(&[(key, value)])).unwrap_err();
            assert!(matches!(err, Error::Config(_)), "{key}={value}: {err}");
            let text = err.to_string();
            assert!(
                text.contains(&format!("`{key}`")) && text.contains("2147483647"),
                "{key}={value}: {text}"
            );
        }
        let o = TableOptions::from_map(&map(&[
            ("commit.max-retries", "2147483647"),
            ("file.compression.zstd-level", "9"),
        ]))
        .unwrap();
        assert_eq!(o.commit_max_retries, i32::MAX as u32);
        assert_eq!(o.zstd_level, 9);
    }

    /// lakejoin's page limits unless the table sets Paimon's options; a limit of 0, which
    /// parquet-mr refuses, is an error naming the option.
    #[test]
    fn parquet_page_limits_are_taken_from_the_table() {
        let o = TableOptions::from_map(&map(&[])).unwrap();
        assert_eq!((o.parquet_page_rows, o.parquet_page_bytes), (1024, 1 << 20));
        let o = TableOptions::from_map(&map(&[
            ("parquet.page.row.count.limit", "1000"),
            ("parquet.page.size", "65536"),
        ]))
        .unwrap();
        assert_eq!((o.parquet_page_rows, o.parquet_page_bytes), (1000, 65536));
        let err = TableOptions::from_map(&map(&[
            ("parquet.page.row.count.limit", "0"),
            ("parquet.page.size", "1mb"),
        ]))
        .unwrap_err()
        .to_string();
        assert!(
            err.contains("`parquet.page.row.count.limit` must be at least 1")
                && err.contains("`parquet.page.size` must be an integer"),
            "{err}"
        );
    }

    proptest::proptest! {
        #[test]
        fn any_retry_count_is_taken_exactly_or_rejected(n in proptest::num::u64::ANY) {
            let text = n.to_string();
            match TableOptions::from_map(&map(&[("commit.max-retries", &text)])) {
                Ok(o) => {
                    proptest::prop_assert!(n <= i32::MAX as u64);
                    proptest::prop_assert_eq!(u64::from(o.commit_max_retries), n);
                }
                Err(e) => {
                    proptest::prop_assert!(n > i32::MAX as u64);
                    proptest::prop_assert!(e.to_string().contains("commit.max-retries"));
                }
            }
        }

        #[test]
        fn any_target_file_size_is_taken_exactly_or_rejected(n in proptest::num::u64::ANY) {
            let text = n.to_string();
            match TableOptions::from_map(&map(&[("target-file-size", &text)])) {
                Ok(o) => proptest::prop_assert_eq!(o.target_file_size, n),
                Err(e) => proptest::prop_assert!(false, "{}", e),
            }
        }
    }

    #[test]
    fn field_options_are_parsed_by_column() {
        let o = TableOptions::from_map(&map(&[
            ("fields.a.aggregate-function", "sum"),
            ("fields.a.ignore-retract", "true"),
            ("fields.b.list-agg-delimiter", " "),
            ("fields.b.distinct", "TRUE"),
            ("fields.s1,s2.sequence-group", "a,b"),
            ("fields.default-aggregate-function", "max"),
            ("fields.c.nested-key", "x"),
            ("aggregation.remove-record-on-delete", "true"),
            ("partial-update.remove-record-on-sequence-group", "s1"),
        ]))
        .unwrap();
        let a = &o.field_options["a"];
        assert_eq!(a.aggregate_function.as_deref(), Some("sum"));
        assert!(a.ignore_retract);
        assert_eq!(
            o.field_options["b"].list_agg_delimiter.as_deref(),
            Some(" ")
        );
        assert!(o.field_options["b"].distinct);
        assert_eq!(o.sequence_groups[0].sequence_fields, ["s1", "s2"]);
        assert_eq!(o.sequence_groups[0].fields, ["a", "b"]);
        assert_eq!(o.default_aggregate_function.as_deref(), Some("max"));
        assert!(o.aggregation_remove_record_on_delete);
        assert_eq!(o.remove_record_on_sequence_group, ["s1"]);
        assert!(
            o.field_option_names
                .iter()
                .any(|(k, n)| k == "fields.c.nested-key" && n == &["c"])
        );
        assert_refused(
            &[
                ("fields.a.ignore-retract", "yes"),
                ("fields.b.distinct", "1"),
            ],
            &["fields.a.ignore-retract", "fields.b.distinct"],
        );
    }

    #[test]
    fn maintenance_defaults_follow_the_trigger() {
        let o = TableOptions::from_map(&map(&[("bucket", "1")])).unwrap();
        let m = &o.maintenance;
        assert_eq!(
            (m.compaction_trigger, m.stop_trigger, m.num_levels),
            (5, 8, 6)
        );
        assert_eq!((m.max_size_amplification_percent, m.size_ratio), (200, 1));
        assert_eq!(
            (m.snapshot_retained_min, m.snapshot_retained_max),
            (10, i32::MAX as usize)
        );
        assert_eq!(m.snapshot_time_retained, Duration::from_secs(3600));
        assert!(!m.write_only && !o.batch_scan_skips_level0() && !o.force_up_level0());
        let o = TableOptions::from_map(&map(&[
            ("bucket", "1"),
            ("num-sorted-run.compaction-trigger", "3"),
            ("num-sorted-run.stop-trigger", "2"),
            ("merge-engine", "first-row"),
            ("snapshot.time-retained", "30 min"),
        ]))
        .unwrap();
        let m = &o.maintenance;
        assert_eq!(
            (m.compaction_trigger, m.stop_trigger, m.num_levels),
            (3, 3, 4)
        );
        assert_eq!(m.snapshot_time_retained, Duration::from_secs(1800));
        assert!(o.batch_scan_skips_level0() && o.force_up_level0());
        assert_refused(
            &[
                ("bucket", "1"),
                ("num-levels", "1"),
                ("snapshot.num-retained.min", "5"),
                ("snapshot.num-retained.max", "2"),
                ("snapshot.time-retained", "soon"),
            ],
            &["num-levels", "num-retained.max", "time-retained"],
        );
    }

    #[test]
    fn durations_parse_like_paimon() {
        let secs = |n| Some(Duration::from_secs(n));
        for (text, expected) in [
            ("30s", secs(30)),
            ("5 min", secs(300)),
            ("1h", secs(3600)),
            ("2 d", secs(172_800)),
            ("1 day", secs(86_400)),
            // A bare number is milliseconds, as in Paimon.
            ("250", Some(Duration::from_millis(250))),
            ("h", None),
            ("5 fortnights", None),
            ("99999999999999999999 d", None),
            ("", None),
        ] {
            assert_eq!(parse_duration(text).ok(), expected, "{text:?}");
        }
    }
}
