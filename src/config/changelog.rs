//! Validation of `[[changelog]]` entries: the format, the key columns, where to start, the
//! consumer id, and whether the table's changes are its merged rows' changes at all (a
//! partial-update table without a `lookup` changelog would send partial rows).
//!
//! Why its own module: these checks need the table's options and the CDC pipelines
//! (a changelog topic that feeds its own table back is a loop), and they would push
//! `config/mod.rs` past a readable size.

use std::collections::BTreeMap;

use super::{CdcConfig, ChangelogConfig, ChangelogStart, check_format, check_nonzero};
use crate::codec::changelog::{OP_FIELD, valid_avro_name};
use crate::table::consumer::valid_consumer_id;
use crate::table::options::TableOptions;
use crate::table::schema::TableSchema;

/// Formats of `[[changelog]]` records.
pub(crate) const CHANGELOG_FORMATS: [&str; 3] = ["debezium-json", "json", "avro"];

/// Adds every problem of changelog pipeline `c` (named `at` in messages) to `problems`.
pub(super) fn check(
    c: &ChangelogConfig,
    at: &str,
    schemas: &BTreeMap<String, TableSchema>,
    cdc: &[CdcConfig],
    problems: &mut Vec<String>,
) {
    check_format(
        &format!("{at}.format"),
        &c.format,
        &CHANGELOG_FORMATS,
        problems,
    );
    if c.schema_registry.is_some() && c.format != "avro" {
        problems.push(format!(
            "{at}.schema_registry: only `avro` records use a registry, and format is `{}`",
            c.format
        ));
    }
    if c.topic.trim().is_empty() {
        problems.push(format!("{at}.topic: must not be empty"));
    }
    check_nonzero(
        at,
        &[("discovery_interval", c.discovery_interval.is_zero())],
        problems,
    );
    match &c.start_from {
        ChangelogStart::Named(name) if name == "earliest" || name == "latest" => {}
        ChangelogStart::Named(other) => problems.push(format!(
            "{at}.start_from: must be \"earliest\", \"latest\" or a snapshot id, got `{other}`"
        )),
        ChangelogStart::Snapshot(id) if *id < 1 => problems.push(format!(
            "{at}.start_from: snapshot ids start at 1, got {id}"
        )),
        ChangelogStart::Snapshot(_) => {}
    }
    if !valid_consumer_id(c.consumer_id()) {
        let key = if c.consumer_id.is_some() {
            "consumer_id"
        } else {
            "name"
        };
        problems.push(format!(
            "{at}.{key}: `{}` cannot name a Paimon consumer (1 to 200 of A-Z a-z 0-9 . _ -, \
             not starting with a dot)",
            c.consumer_id()
        ));
    }
    for feeder in cdc.iter().filter(|d| d.table == c.table) {
        if feeder.topics.contains(&c.topic) {
            problems.push(format!(
                "{at}.topic: `{}` is read by [[cdc]] {} into {}: the changes would loop",
                c.topic, feeder.name, c.table
            ));
        }
    }
    let Some(schema) = schemas.get(&c.table) else {
        problems.push(format!(
            "{at}.table: `{}` is not defined by any [[table]]",
            c.table
        ));
        return;
    };
    for column in &c.key {
        if schema.field(column).is_none() {
            problems.push(format!(
                "{at}.key: `{column}` is not a column of {}",
                c.table
            ));
        }
    }
    if (c.format == "json" || c.format == "avro") && schema.field(OP_FIELD).is_some() {
        problems.push(format!(
            "{at}.format: `{}` adds the field `{OP_FIELD}`, which is a column of {}; \
             use debezium-json",
            c.format, c.table
        ));
    }
    if c.format == "avro" {
        for field in schema.fields.iter().filter(|f| !valid_avro_name(&f.name)) {
            problems.push(format!(
                "{at}.format: column `{}` of {} is not a valid Avro name (a letter or `_`, \
                 then letters, digits or `_`); use debezium-json or json",
                field.name, c.table
            ));
        }
    }
    // A table whose options do not parse is reported by its own [[table]] entry.
    if let Ok(options) = TableOptions::from_map(&schema.options)
        && let Some(reason) = crate::lsm::changes::unfaithful_changes(&options)
    {
        problems.push(format!(
            "{at}.table: {} cannot feed a changelog: {reason}",
            c.table
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::super::from_toml;
    use super::super::testkit::GOOD;
    use std::time::Duration;

    /// GOOD with a `[[changelog]]` of `shop.customers` whose body is `body`.
    fn with_changelog(body: &str) -> String {
        format!(
            "{GOOD}\n[[changelog]]\nname = \"customers-out\"\ntable = \"shop.customers\"\n{body}\n"
        )
    }

    #[test]
    fn a_changelog_pipeline_loads_with_its_defaults() {
        let c = from_toml("c.toml", &with_changelog("topic = \"customers_changes\"")).unwrap();
        let p = &c.changelog[0];
        assert_eq!(p.format, "debezium-json");
        assert!(p.key.is_empty());
        assert_eq!(
            p.start_from,
            super::ChangelogStart::Named("earliest".into())
        );
        assert_eq!(p.discovery_interval, Duration::from_secs(1));
        assert_eq!(p.consumer_id(), "customers-out");
        assert!(
            c.summary().ends_with(", 1 changelog pipeline(s)"),
            "{}",
            c.summary()
        );
        let c = from_toml(
            "c.toml",
            &with_changelog(
                "topic = \"t\"\nformat = \"json\"\nkey = [\"name\"]\nstart_from = 3\n\
                 discovery_interval = \"250ms\"\nconsumer_id = \"out-1\"",
            ),
        )
        .unwrap();
        let p = &c.changelog[0];
        assert_eq!(p.start_from, super::ChangelogStart::Snapshot(3));
        assert_eq!(p.consumer_id(), "out-1");
    }

    #[test]
    fn every_problem_is_named_with_its_key_and_file() {
        let text = with_changelog(
            "topic = \"dbserver1.shop.customers\"\nformat = \"avro-ish\"\nkey = [\"nope\"]\n\
             start_from = \"yesterday\"\ndiscovery_interval = \"0s\"\nconsumer_id = \"a/b\"\n\
             colour = \"red\"",
        );
        let err = from_toml("c.toml", &text).unwrap_err().to_string();
        // An unknown key is reported with the others.
        assert!(
            err.contains("c.toml: changelog[0] (customers-out).colour: unknown key"),
            "{err}"
        );
        let text = text.replace("\ncolour = \"red\"", "");
        let err = from_toml("c.toml", &text).unwrap_err().to_string();
        for needle in [
            "c.toml: changelog[0] (customers-out).format: `avro-ish` is not one of debezium-json, json, avro",
            "changelog[0] (customers-out).key: `nope` is not a column of shop.customers",
            "changelog[0] (customers-out).start_from: must be \"earliest\", \"latest\" or a snapshot id, got `yesterday`",
            "changelog[0] (customers-out).discovery_interval: must be greater than zero",
            "changelog[0] (customers-out).consumer_id: `a/b` cannot name a Paimon consumer",
            "changelog[0] (customers-out).topic: `dbserver1.shop.customers` is read by [[cdc]] customers-cdc into shop.customers: the changes would loop",
        ] {
            assert!(err.contains(needle), "missing {needle:?} in\n{err}");
        }
        let err = from_toml(
            "c.toml",
            &with_changelog("topic = \"t\"\nstart_from = 0").replace(
                "table = \"shop.customers\"\ntopic",
                "table = \"shop.nope\"\ntopic",
            ),
        )
        .unwrap_err()
        .to_string();
        assert!(
            err.contains("start_from: snapshot ids start at 1, got 0"),
            "{err}"
        );
        assert!(
            err.contains(
                "changelog[0] (customers-out).table: `shop.nope` is not defined by any [[table]]"
            ),
            "{err}"
        );
        let twice = format!(
            "{}\n[[changelog]]\nname = \"customers-out\"\ntable = \"shop.customers\"\ntopic = \"u\"\n",
            with_changelog("topic = \"t\"")
        );
        let err = from_toml("c.toml", &twice).unwrap_err().to_string();
        assert!(
            err.contains("pipeline name `customers-out` is used twice"),
            "{err}"
        );
    }

    #[test]
    fn avro_takes_a_registry_and_only_it_does() {
        let c = from_toml(
            "c.toml",
            &with_changelog(
                "topic = \"t\"\nformat = \"avro\"\nschema_registry = \"http://u:pw@registry:8081\"",
            ),
        )
        .unwrap();
        assert_eq!(c.changelog[0].format, "avro");
        assert_eq!(
            c.changelog[0].schema_registry.as_ref().map(|u| u.expose()),
            Some("http://u:pw@registry:8081")
        );
        let err = from_toml(
            "c.toml",
            &with_changelog("topic = \"t\"\nschema_registry = \"http://registry:8081\""),
        )
        .unwrap_err()
        .to_string();
        assert!(
            err.contains(
                "c.toml: changelog[0] (customers-out).schema_registry: only `avro` records use \
                 a registry, and format is `debezium-json`"
            ),
            "{err}"
        );
    }

    #[test]
    fn a_table_whose_changes_are_not_its_merged_rows_is_refused_with_the_producer_to_set() {
        let partial = GOOD.replace(
            "sequence_field = [\"updated_at\"]",
            "sequence_field = [\"updated_at\"]\nmerge_engine = \"partial-update\"",
        );
        let text = format!(
            "{partial}\n[[changelog]]\nname = \"out\"\ntable = \"shop.customers\"\ntopic = \"t\"\n"
        );
        let err = from_toml("c.toml", &text).unwrap_err().to_string();
        assert!(
            err.contains(
                "c.toml: changelog[0] (out).table: shop.customers cannot feed a changelog"
            ) && err.contains("partial rows")
                && err.contains("'changelog-producer' = 'lookup'"),
            "{err}"
        );
        let lookup = partial.replace(
            "merge_engine = \"partial-update\"",
            "merge_engine = \"partial-update\"\noptions = { \"changelog-producer\" = \"lookup\" }",
        );
        let text = format!(
            "{lookup}\n[[changelog]]\nname = \"out\"\ntable = \"shop.customers\"\ntopic = \"t\"\n"
        );
        from_toml("c.toml", &text).unwrap();
    }

    #[test]
    fn json_needs_a_table_without_an_op_column() {
        let text = GOOD.replace(
            "{ name = \"name\", type = \"STRING\" },",
            "{ name = \"name\", type = \"STRING\" },\n  { name = \"op\", type = \"STRING\" },",
        );
        let text = format!(
            "{text}\n[[changelog]]\nname = \"out\"\ntable = \"shop.customers\"\ntopic = \"t\"\nformat = \"json\"\n"
        );
        let err = from_toml("c.toml", &text).unwrap_err().to_string();
        assert!(err.contains("format: `json` adds the field `op`"), "{err}");
    }

    /// The README's `[[changelog]]` example, with a `[kafka]` and a `[warehouse]`,
    /// loads as it is.
    #[test]
    fn the_readmes_example_loads() {
        let readme = include_str!("../../README.md");
        let block = readme
            .split("```toml\n")
            .skip(1)
            .filter_map(|b| b.split("```").next())
            .find(|b| b.contains("[[changelog]]"))
            .expect("the README has a [[changelog]] example");
        let text = format!(
            "[kafka]\nbootstrap_servers = \"localhost:9092\"\n[warehouse]\nuri = \"memory://\"\n{block}"
        );
        let c = from_toml("README.md", &text).unwrap();
        assert_eq!(c.changelog[0].name, "wide-out");
        assert_eq!(c.changelog[0].key, ["user_id"]);
        // Without the producer the example is refused, naming the option to set.
        let bare = text.replace("options = { \"changelog-producer\" = \"lookup\" }", "");
        let err = from_toml("README.md", &bare).unwrap_err().to_string();
        assert!(err.contains("'changelog-producer' = 'lookup'"), "{err}");
    }
}
