//! Typed view of the Paimon table options lakejoin understands. Option names and defaults
//! are Paimon's own, so other engines reading the schema merge the same way.

use std::collections::BTreeMap;

use crate::error::{Error, Result};

/// `merge-engine`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MergeEngineKind {
    Deduplicate,
    PartialUpdate,
    Aggregation,
    FirstRow,
}

impl MergeEngineKind {
    pub fn parse(text: &str) -> Option<Self> {
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
    pub merge_engine: MergeEngineKind,
    /// `sequence.field`: columns ordering versions of a key.
    pub sequence_fields: Vec<String>,
    /// `sequence.field.sort-order` = descending flips the order of sequence values.
    pub sequence_descending: bool,
    /// `partial-update.ignore-delete` or `ignore-delete`.
    pub ignore_delete: bool,
    /// `partial-update.remove-record-on-delete`.
    pub remove_record_on_delete: bool,
    /// `partition.default-name`.
    pub partition_default_name: String,
    /// `file.format`.
    pub file_format: String,
    /// `file.compression`.
    pub file_compression: String,
    /// `file.compression.zstd-level`.
    pub zstd_level: i32,
    /// `manifest.compression`.
    pub manifest_compression: String,
    /// `commit.max-retries`.
    pub commit_max_retries: u32,
    /// `target-file-size` in bytes (rolling is by estimated size).
    pub target_file_size: u64,
}

impl TableOptions {
    /// Parses the options map of a schema; lists every invalid value at once.
    pub fn from_map(options: &BTreeMap<String, String>) -> Result<Self> {
        let mut problems = Vec::new();
        let get = |k: &str| options.get(k).map(|s| s.trim());
        let parse_bool = |k: &str, problems: &mut Vec<String>| -> bool {
            match get(k) {
                None => false,
                Some(v) if v.eq_ignore_ascii_case("true") => true,
                Some(v) if v.eq_ignore_ascii_case("false") => false,
                Some(v) => {
                    problems.push(format!("option `{k}` must be true or false, got `{v}`"));
                    false
                }
            }
        };
        let ignore_delete = parse_bool("partial-update.ignore-delete", &mut problems)
            | parse_bool("ignore-delete", &mut problems)
            | parse_bool("first-row.ignore-delete", &mut problems)
            | parse_bool("deduplicate.ignore-delete", &mut problems);
        let remove_record_on_delete =
            parse_bool("partial-update.remove-record-on-delete", &mut problems);
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
        let zstd_level = parse_num("file.compression.zstd-level", 1) as i32;
        let commit_max_retries = parse_num("commit.max-retries", 10) as u32;
        let target_file_size = parse_num("target-file-size", 128 * 1024 * 1024);
        let options = TableOptions {
            bucket,
            merge_engine,
            sequence_fields,
            sequence_descending,
            ignore_delete,
            remove_record_on_delete,
            partition_default_name: get("partition.default-name")
                .unwrap_or("__DEFAULT_PARTITION__")
                .to_string(),
            file_format: get("file.format").unwrap_or("parquet").to_ascii_lowercase(),
            file_compression: get("file.compression")
                .unwrap_or("zstd")
                .to_ascii_lowercase(),
            zstd_level,
            manifest_compression: get("manifest.compression")
                .unwrap_or("zstd")
                .to_ascii_lowercase(),
            commit_max_retries,
            target_file_size,
        };
        if problems.is_empty() {
            Ok(options)
        } else {
            Err(Error::Config(problems.join("; ")))
        }
    }
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

    #[test]
    fn defaults_are_paimons() {
        let o = TableOptions::from_map(&map(&[("bucket", "4")])).unwrap();
        assert_eq!(o.bucket, 4);
        assert_eq!(o.merge_engine, MergeEngineKind::Deduplicate);
        assert_eq!(o.partition_default_name, "__DEFAULT_PARTITION__");
        assert_eq!(o.target_file_size, 128 << 20);
        assert_eq!(o.commit_max_retries, 10);
    }

    #[test]
    fn reports_every_bad_option() {
        let err = TableOptions::from_map(&map(&[
            ("bucket", "x"),
            ("merge-engine", "newest"),
            ("partial-update.ignore-delete", "maybe"),
        ]))
        .unwrap_err()
        .to_string();
        assert!(err.contains("`bucket`"), "{err}");
        assert!(err.contains("`merge-engine`"), "{err}");
        assert!(err.contains("ignore-delete"), "{err}");
        assert_eq!(parse_size("128 mb"), Some(128 << 20));
    }
}
