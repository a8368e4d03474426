//! The changelog options of a table schema, with Paimon's names and defaults
//! (`CoreOptions`): which changelog producer the writers run, how often full compaction
//! produces changes, and how long expiry keeps changelog files (docs/format.md §3.1).
//!
//! Why a module of its own: the options are parsed with the schema like every other
//! option (`TableOptions::from_map`), but they are checked against the merge engine and
//! the primary key as Java's `SchemaValidation` checks them, which belongs with them.

use std::collections::BTreeMap;
use std::time::Duration;

use super::options::{MergeEngineKind, parse_duration};

/// `changelog-producer`: what a table's writers produce besides its data files.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ChangelogProducer {
    /// No changelog files; streaming readers read the delta files.
    #[default]
    None,
    /// The changes as consumed, every version of a key (Java's `INPUT`).
    Input,
    /// Before and after images of the merged rows, computed against the table at
    /// commit time (Java's `LOOKUP`).
    Lookup,
    /// The changes between two full compactions (Java's `FULL_COMPACTION`).
    FullCompaction,
}

impl ChangelogProducer {
    /// The option value, as Paimon spells it.
    pub fn as_str(&self) -> &'static str {
        match self {
            Self::None => "none",
            Self::Input => "input",
            Self::Lookup => "lookup",
            Self::FullCompaction => "full-compaction",
        }
    }

    fn parse(text: &str) -> Option<Self> {
        // Java's enum options are matched case-insensitively.
        match text.to_ascii_lowercase().as_str() {
            "none" => Some(Self::None),
            "input" => Some(Self::Input),
            "lookup" => Some(Self::Lookup),
            "full-compaction" => Some(Self::FullCompaction),
            _ => None,
        }
    }
}

/// The changelog options of a table.
#[derive(Debug, Clone, PartialEq)]
pub struct ChangelogOptions {
    /// `changelog-producer` (`none`).
    pub producer: ChangelogProducer,
    /// `changelog-producer.row-deduplicate` (false): `lookup` and `full-compaction` emit
    /// no `-U/+U` pair for a key whose merged row did not change.
    pub(crate) row_deduplicate: bool,
    /// `full-compaction.delta-commits` (unset): a full compaction, and with
    /// `full-compaction` its changelog, after every this many commits of a writer.
    pub(crate) full_compaction_delta_commits: Option<u32>,
    /// `changelog.num-retained.min`: defaults to `snapshot.num-retained.min`.
    pub(crate) retained_min: usize,
    /// `changelog.num-retained.max`: defaults to `snapshot.num-retained.max`.
    pub(crate) retained_max: usize,
    /// `changelog.time-retained`: defaults to `snapshot.time-retained`.
    pub(crate) time_retained: Duration,
}

impl ChangelogOptions {
    /// Whether writers produce changelog files.
    pub fn produces(&self) -> bool {
        self.producer != ChangelogProducer::None
    }

    /// Whether expiry must keep changelog files beyond the snapshots that name them
    /// (Java's `changelogDecoupled`: changelog retention longer than the snapshots').
    pub(crate) fn decoupled(
        &self,
        snapshot_min: usize,
        snapshot_max: usize,
        snapshot_time: Duration,
    ) -> bool {
        self.produces()
            && (self.retained_min > snapshot_min
                || self.retained_max > snapshot_max
                || self.time_retained > snapshot_time)
    }
}

/// What `parse` needs of the options already parsed.
pub(crate) struct Defaults {
    pub(crate) merge_engine: MergeEngineKind,
    pub(crate) snapshot_retained_min: usize,
    pub(crate) snapshot_retained_max: usize,
    pub(crate) snapshot_time_retained: Duration,
}

/// Parses the changelog options, adding every invalid value or combination (Java's
/// `SchemaValidation` rules) to `problems`.
pub(crate) fn parse(
    options: &BTreeMap<String, String>,
    defaults: &Defaults,
    problems: &mut Vec<String>,
) -> ChangelogOptions {
    let get = |k: &str| options.get(k).map(|s| s.trim());
    let producer = match get("changelog-producer") {
        None => ChangelogProducer::None,
        Some(v) => ChangelogProducer::parse(v).unwrap_or_else(|| {
            problems.push(format!(
                "option `changelog-producer` must be none, input, lookup or full-compaction, \
                 got `{v}`"
            ));
            ChangelogProducer::None
        }),
    };
    let row_deduplicate = match get("changelog-producer.row-deduplicate") {
        None => false,
        Some(v) if v.eq_ignore_ascii_case("true") => true,
        Some(v) if v.eq_ignore_ascii_case("false") => false,
        Some(v) => {
            problems.push(format!(
                "option `changelog-producer.row-deduplicate` must be true or false, got `{v}`"
            ));
            false
        }
    };
    let full_compaction_delta_commits = match get("full-compaction.delta-commits") {
        None => None,
        Some(v) => match v.parse::<u32>() {
            Ok(n) if (1..=i32::MAX as u32).contains(&n) => Some(n),
            _ => {
                problems.push(format!(
                    "option `full-compaction.delta-commits` must be an integer ≥ 1, got `{v}`"
                ));
                None
            }
        },
    };
    let mut count = |k: &str, default: usize| match get(k) {
        None => default,
        Some(v) => match v.parse::<u32>() {
            Ok(n) if (1..=i32::MAX as u32).contains(&n) => n as usize,
            _ => {
                problems.push(format!("option `{k}` must be an integer ≥ 1, got `{v}`"));
                default
            }
        },
    };
    let retained_min = count("changelog.num-retained.min", defaults.snapshot_retained_min);
    let retained_max = count("changelog.num-retained.max", defaults.snapshot_retained_max);
    if retained_min > retained_max {
        problems.push(format!(
            "option `changelog.num-retained.min` ({retained_min}) should not be larger than \
             `changelog.num-retained.max` ({retained_max})"
        ));
    }
    let time_retained = match get("changelog.time-retained") {
        None => defaults.snapshot_time_retained,
        Some(v) => parse_duration(v).unwrap_or_else(|e| {
            problems.push(format!("option `changelog.time-retained`: {e}"));
            defaults.snapshot_time_retained
        }),
    };
    if defaults.merge_engine == MergeEngineKind::FirstRow
        && !matches!(
            producer,
            ChangelogProducer::None | ChangelogProducer::Lookup
        )
    {
        problems.push(
            "only `changelog-producer` none and lookup are supported with merge-engine \
             first-row (Paimon's rule)"
                .to_string(),
        );
    }
    if full_compaction_delta_commits.is_some() && producer == ChangelogProducer::Lookup {
        problems.push(
            "option `full-compaction.delta-commits` is incompatible with \
             `changelog-producer` = lookup; use `changelog-producer` = full-compaction for \
             periodic full compaction with changelog, or remove \
             `full-compaction.delta-commits`"
                .to_string(),
        );
    }
    ChangelogOptions {
        producer,
        row_deduplicate,
        full_compaction_delta_commits,
        retained_min,
        retained_max,
        time_retained,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::table::options::TableOptions;

    fn options(pairs: &[(&str, &str)]) -> crate::error::Result<TableOptions> {
        TableOptions::from_map(
            &pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        )
    }

    #[test]
    fn defaults_are_paimons() {
        let o = options(&[]).unwrap().changelog;
        assert_eq!(o.producer, ChangelogProducer::None);
        assert!(!o.produces());
        assert!(!o.row_deduplicate);
        assert_eq!(o.full_compaction_delta_commits, None);
        assert_eq!(o.retained_min, 10);
        assert_eq!(o.retained_max, i32::MAX as usize);
        assert_eq!(o.time_retained, Duration::from_secs(3600));
        // The changelog counts default to the snapshot counts.
        let o = options(&[
            ("snapshot.num-retained.min", "3"),
            ("snapshot.time-retained", "5 min"),
        ])
        .unwrap()
        .changelog;
        assert_eq!(
            (o.retained_min, o.time_retained),
            (3, Duration::from_secs(300))
        );
    }

    #[test]
    fn every_producer_parses_by_paimons_name() {
        for p in [
            ChangelogProducer::None,
            ChangelogProducer::Input,
            ChangelogProducer::Lookup,
            ChangelogProducer::FullCompaction,
        ] {
            let o = options(&[("changelog-producer", p.as_str())])
                .unwrap()
                .changelog;
            assert_eq!(o.producer, p);
        }
        let o = options(&[("changelog-producer", "LOOKUP")])
            .unwrap()
            .changelog;
        assert_eq!(o.producer, ChangelogProducer::Lookup);
    }

    #[test]
    fn invalid_values_and_combinations_are_refused_as_java_refuses_them() {
        let refused = |pairs: &[(&str, &str)], needle: &str| {
            let e = options(pairs).unwrap_err().to_string();
            assert!(e.contains(needle), "{needle:?} not in {e}");
        };
        refused(&[("changelog-producer", "full")], "changelog-producer");
        refused(
            &[("changelog-producer.row-deduplicate", "yes")],
            "row-deduplicate",
        );
        refused(&[("full-compaction.delta-commits", "0")], "delta-commits");
        refused(
            &[
                ("merge-engine", "first-row"),
                ("changelog-producer", "input"),
            ],
            "first-row",
        );
        refused(
            &[
                ("merge-engine", "first-row"),
                ("changelog-producer", "full-compaction"),
            ],
            "first-row",
        );
        refused(
            &[
                ("changelog-producer", "lookup"),
                ("full-compaction.delta-commits", "2"),
            ],
            "incompatible",
        );
        refused(
            &[
                ("changelog.num-retained.min", "5"),
                ("changelog.num-retained.max", "4"),
            ],
            "changelog.num-retained.min",
        );
        assert!(
            options(&[
                ("merge-engine", "first-row"),
                ("changelog-producer", "lookup")
            ])
            .is_ok()
        );
    }

    #[test]
    fn decoupled_when_changelog_outlives_snapshots() {
        let o = options(&[
            ("changelog-producer", "input"),
            ("changelog.num-retained.max", "100"),
        ])
        .unwrap();
        let m = &o.maintenance;
        assert!(!o.changelog.decoupled(
            m.snapshot_retained_min,
            m.snapshot_retained_max,
            m.snapshot_time_retained
        ));
        let o = options(&[
            ("changelog-producer", "input"),
            ("snapshot.num-retained.max", "20"),
            ("changelog.num-retained.max", "100"),
        ])
        .unwrap();
        let m = &o.maintenance;
        assert!(o.changelog.decoupled(
            m.snapshot_retained_min,
            m.snapshot_retained_max,
            m.snapshot_time_retained
        ));
    }
}
