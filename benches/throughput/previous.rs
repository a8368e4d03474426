//! The previous benchmark run, read back from the BENCHMARKS.md it wrote, for the
//! results table's history column.
//!
//! Why from the file: the harness keeps no other state between runs, and the file is
//! what readers compare against; each run then shows how the changes since the last
//! moved every figure without anyone copying numbers by hand.

/// The run before this one, as its BENCHMARKS.md recorded it: per case, its ratio to
/// passthrough and CPU-seconds per million records, so each run shows how the last
/// changes moved every figure.
#[derive(Debug, Default)]
pub struct Previous {
    commit: Option<String>,
    date: Option<String>,
    /// Case name → "ratio, CPU-s/M" as recorded.
    cases: Vec<(String, String)>,
}

impl Previous {
    pub fn parse(old: &str) -> Self {
        let field = |key: &str| {
            old.lines()
                .find_map(|l| l.strip_prefix(key))
                .map(|v| v.split_whitespace().next().unwrap_or_default().to_owned())
        };
        // Only the results table: it ends at the first blank line after its heading row.
        let results = old
            .find("| case | records |")
            .map(|at| &old[at..])
            .and_then(|t| t.split("\n\n").next())
            .unwrap_or_default();
        let cases = results
            .lines()
            .skip(2)
            .filter_map(|row| {
                let cells: Vec<&str> = row.trim_matches('|').split('|').map(str::trim).collect();
                let name = cells.first()?;
                if cells.get(2).is_some_and(|c| c.starts_with("FAILED")) {
                    return Some(((*name).to_owned(), "failed".to_owned()));
                }
                let (ratio, cpu) = (cells.get(3)?, cells.get(4)?);
                Some(((*name).to_owned(), format!("{ratio}, {cpu}")))
            })
            .collect();
        Previous {
            commit: field("- commit: "),
            date: field("- date: "),
            cases,
        }
    }

    pub fn heading(&self) -> String {
        match (&self.commit, &self.date) {
            (Some(c), Some(d)) => format!("previous run ({c}, {d}): ×, CPU-s/M"),
            _ => "previous run: ×, CPU-s/M".to_owned(),
        }
    }

    pub fn of(&self, name: &str) -> &str {
        self.cases
            .iter()
            .find(|(n, _)| n == name)
            .map_or("", |(_, v)| v.as_str())
    }
}
