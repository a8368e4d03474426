//! A connectors.toml built from a fixture file (`integration-tests/fixtures/*.toml`) and
//! named overrides, so a test states only what its config changes instead of pasting the
//! whole file. The fixture is parsed, not edited as text: an override sets one key of one
//! section, a fragment adds sections or pipelines, and an override of a pipeline the
//! fixture lacks or a fragment that collides with the fixture fails loudly instead of
//! writing a config that means something else.

use toml::{Table, Value};

/// A connectors.toml under construction.
#[derive(Clone)]
pub struct Config {
    doc: Table,
    /// `{placeholder}` → value, filled into string values by [`Config::build`].
    names: Vec<(String, String)>,
}

impl Config {
    /// The fixture's TOML. `{placeholders}` in its strings are filled by [`Config::name`];
    /// `{bootstrap}` and `{warehouse}` are left for `Deployment` to fill.
    pub fn fixture(text: &str) -> Config {
        Config {
            doc: text
                .parse()
                .unwrap_or_else(|e| panic!("a fixture that is not TOML: {e}")),
            names: Vec::new(),
        }
    }

    /// `{placeholder}` in any string value becomes `value` (a topic, a group).
    pub fn name(mut self, placeholder: &str, value: &str) -> Config {
        self.names
            .push((format!("{{{placeholder}}}"), value.to_owned()));
        self
    }

    /// Sets `key` in the section at `path`: plain tables by name (`kafka`,
    /// `kafka.properties`, created when missing) and entries of an array of tables by one
    /// of their keys (`table[name=shop.customers]`, `enrich[name=orders-enriched]`,
    /// `enrich[name=orders-enriched].join[table=shop.customers]`).
    pub fn set(mut self, path: &str, key: &str, value: impl Into<Value>) -> Config {
        section(&mut self.doc, path).insert(key.to_owned(), value.into());
        self
    }

    /// Appends `value` to the array `key` of the section at `path` (a column, a topic).
    pub fn push(mut self, path: &str, key: &str, value: impl Into<Value>) -> Config {
        section(&mut self.doc, path)
            .get_mut(key)
            .and_then(Value::as_array_mut)
            .unwrap_or_else(|| panic!("{path}: no array `{key}`"))
            .push(value.into());
        self
    }

    /// Adds the sections and pipelines of a TOML `fragment` (`[run]`, another `[[table]]`
    /// and its `[[cdc]]`): its tables are merged into the config's and its arrays of tables
    /// appended. A key the config has already is an error: overrides go through
    /// [`Config::set`].
    pub fn merge(mut self, fragment: &str) -> Config {
        merge(&mut self.doc, parse_fragment(fragment), "");
        self
    }

    /// Every top-level key of a TOML `fragment` replaces the config's (a whole `[[enrich]]`
    /// array, say).
    pub fn replace(mut self, fragment: &str) -> Config {
        self.doc.extend(parse_fragment(fragment));
        self
    }

    /// The config text, placeholders filled.
    pub fn build(&self) -> String {
        let mut doc = Value::Table(self.doc.clone());
        fill(&mut doc, &self.names);
        toml::to_string(&doc).expect("a TOML table serializes")
    }
}

/// A TOML value written as TOML (`{ on = "miss", delay = "1s" }`), for [`Config::set`].
pub fn toml_value(text: &str) -> Value {
    text.parse()
        .unwrap_or_else(|e| panic!("not a TOML value: {text}: {e}"))
}

fn parse_fragment(fragment: &str) -> Table {
    fragment
        .parse()
        .unwrap_or_else(|e| panic!("a fragment that is not TOML: {e}\n{fragment}"))
}

/// The section at `path` (see [`Config::set`]).
fn section<'a>(doc: &'a mut Table, path: &str) -> &'a mut Table {
    let mut table = doc;
    for segment in segments(path) {
        table = match segment.split_once('[') {
            Some((array, selector)) => {
                let (key, wanted) = selector
                    .strip_suffix(']')
                    .and_then(|s| s.split_once('='))
                    .unwrap_or_else(|| panic!("{path}: `{segment}` is not `array[key=value]`"));
                table
                    .get_mut(array)
                    .and_then(Value::as_array_mut)
                    .and_then(|entries| {
                        entries
                            .iter_mut()
                            .filter_map(Value::as_table_mut)
                            .find(|entry| entry.get(key).and_then(Value::as_str) == Some(wanted))
                    })
                    .unwrap_or_else(|| panic!("{path}: no [[{array}]] with {key} = {wanted:?}"))
            }
            None => table
                .entry(segment)
                .or_insert_with(|| Value::Table(Table::new()))
                .as_table_mut()
                .unwrap_or_else(|| panic!("{path}: `{segment}` is not a table")),
        };
    }
    table
}

/// `path` split at the dots outside `[...]` (table names have dots: `shop.customers`).
fn segments(path: &str) -> Vec<&str> {
    let mut segments = Vec::new();
    let (mut start, mut depth) = (0, 0);
    for (i, c) in path.char_indices() {
        match c {
            '[' => depth += 1,
            ']' => depth -= 1,
            '.' if depth == 0 => {
                segments.push(&path[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    segments.push(&path[start..]);
    segments
}

fn merge(into: &mut Table, fragment: Table, at: &str) {
    for (key, value) in fragment {
        let here = if at.is_empty() {
            key.clone()
        } else {
            format!("{at}.{key}")
        };
        match (into.get_mut(&key), value) {
            (None, value) => {
                into.insert(key, value);
            }
            (Some(Value::Table(existing)), Value::Table(added)) => merge(existing, added, &here),
            (Some(Value::Array(existing)), Value::Array(added))
                if existing.iter().chain(&added).all(Value::is_table) =>
            {
                existing.extend(added)
            }
            (Some(_), _) => panic!("the fragment sets `{here}`, which the config has already"),
        }
    }
}

fn fill(value: &mut Value, names: &[(String, String)]) {
    match value {
        Value::String(text) => {
            for (placeholder, name) in names {
                *text = text.replace(placeholder.as_str(), name);
            }
        }
        Value::Array(values) => values.iter_mut().for_each(|v| fill(v, names)),
        Value::Table(table) => table.iter_mut().for_each(|(_, v)| fill(v, names)),
        _ => {}
    }
}
