//! Comparing two lakejoins on one broker and one data set: `COMPARE_BIN` (another build)
//! and/or `COMPARE_KAFKA_PROPERTIES` (other client settings) against the usual one. Each
//! chosen lakejoin case runs `ROUNDS` times per variant, A and B alternating (A first in
//! odd rounds, B first in even ones, so neither always runs on a broker the other just
//! warmed), and the
//! summary (ratios.rs) gives, per case, the median of the rounds' B/A ratios and their
//! range. It is written to `COMPARISON.md` in BENCH_DIR; BENCHMARKS.md is left alone.
//!
//! Why: on these shared machines a case's CPU per record moves by a quarter between runs
//! (the broker's JIT, other tenants, the machine itself), far more than most changes to
//! the record path, so separate runs of `scripts/bench.sh` cannot tell a 5% change from
//! noise. Rounds that alternate on the same warm broker and the same topics, compared
//! pair by pair, cancel the machine's slow drift; the range of the ratios says how far to
//! trust their median. With `INSTRUCTIONS=1` the measured processes run under callgrind
//! and the summary adds their instructions per record (callgrind.rs).

use std::path::PathBuf;

use anyhow::{Context, Result, bail};

use crate::lakejoin::Variant;
use crate::ratios::{Figures, case_summary, shown};
use crate::report::{self, CASE_PROCESS, CaseResult};
use crate::{Bench, STORM_CASE};

/// The two lakejoins compared and how many rounds each case gets.
#[derive(Debug, Clone)]
pub struct Comparison {
    pub a: Variant,
    pub b: Variant,
    pub rounds: usize,
}

/// What a run of a case gave, for the summary.
fn figures(result: &CaseResult) -> Figures {
    Figures {
        rate: result.rate,
        cpu_per_million: result.cpu_per_million(CASE_PROCESS),
        peak_rss_mib: result.peak_rss_mib,
        instructions_per_record: result.instructions_per_record,
    }
}

impl Comparison {
    /// The comparison `COMPARE_BIN` / `COMPARE_KAFKA_PROPERTIES` ask for, against `a`
    /// (`None`: neither is set, a normal run). B takes from A what it does not set.
    /// Counting instructions (`INSTRUCTIONS=1`) is always a comparison, since the other
    /// figures of a run under callgrind must not reach BENCHMARKS.md; without either
    /// variable B is A itself, and the two counts show how repeatable they are.
    pub fn from_env(a: &Variant) -> Result<Option<Self>> {
        let binary = std::env::var_os("COMPARE_BIN").map(PathBuf::from);
        let properties = std::env::var("COMPARE_KAFKA_PROPERTIES").ok();
        let counting = a.callgrind.is_some();
        if binary.is_none() && properties.is_none() && !counting {
            return Ok(None);
        }
        let b = Variant {
            binary: binary.unwrap_or_else(|| a.binary.clone()),
            kafka_properties: properties.unwrap_or_else(|| a.kafka_properties.clone()),
            callgrind: a.callgrind.clone(),
        };
        if !b.binary.is_file() {
            bail!("COMPARE_BIN={} is not a file", b.binary.display());
        }
        if b == *a && !counting {
            bail!("COMPARE_BIN and COMPARE_KAFKA_PROPERTIES give the same lakejoin as A");
        }
        let rounds = match std::env::var("ROUNDS") {
            Ok(v) => v
                .parse()
                .ok()
                .filter(|&n| n >= 1)
                .with_context(|| format!("ROUNDS={v}: a whole number ≥ 1, please"))?,
            // Counts hardly vary from round to round; times do.
            Err(_) if counting => 1,
            Err(_) => 3,
        };
        Ok(Some(Comparison {
            a: a.clone(),
            b,
            rounds,
        }))
    }

    /// What A and B are.
    pub fn header(&self) -> String {
        let describe = |v: &Variant| {
            let properties = if v.kafka_properties.is_empty() {
                "lakejoin's own client settings".to_owned()
            } else {
                format!("`{}`", v.kafka_properties)
            };
            format!("`{}`, {properties}", v.binary.display())
        };
        let counting = match &self.a.callgrind {
            Some(valgrind) => format!(
                "- every measured lakejoin ran under callgrind (`{}`): its instructions per record are the figure to read; its records/s, CPU and RSS mean nothing\n",
                valgrind.display()
            ),
            None => String::new(),
        };
        format!(
            "# Comparison\n\n- A: {}\n- B: {}\n- {} rounds per case, A first in odd rounds, B first in even ones\n{counting}",
            describe(&self.a),
            describe(&self.b),
            self.rounds
        )
    }

    /// Runs case `name` `rounds` times per variant, alternating; `run` runs it once with a
    /// variant, under a tag (`A1`, `B1`, …) that keeps the runs' topics and files apart.
    /// Returns the case's section of the summary. A failed run fails the comparison.
    pub fn run_case(
        &self,
        name: &str,
        run: &mut dyn FnMut(&Variant, &str) -> Result<CaseResult>,
    ) -> Result<String> {
        let mut a = Vec::new();
        let mut b = Vec::new();
        for round in 1..=self.rounds {
            let mut order = [("A", &self.a, &mut a), ("B", &self.b, &mut b)];
            if round % 2 == 0 {
                order.reverse();
            }
            for (label, variant, runs) in order {
                let tag = format!("{label}{round}");
                let result = run(variant, &tag).with_context(|| format!("{name}, {tag}"))?;
                let f = figures(&result);
                println!(
                    "{name} [{tag}]: {:.0} records/s, {} CPU-s per M, peak RSS {} MiB, {} instructions per record",
                    f.rate,
                    shown(f.cpu_per_million, 2),
                    shown(f.peak_rss_mib, 0),
                    shown(f.instructions_per_record, 0)
                );
                runs.push(f);
            }
        }
        Ok(case_summary(name, &a, &b))
    }

    /// Runs the chosen lakejoin cases (enrich, storm, CDC ingest) of a comparison and writes
    /// its summary to `COMPARISON.md` in the run's directory.
    pub fn run(&self, bench: &Bench, enrich_cases: &[(String, String, &str, usize)]) -> Result<()> {
        let mut summary = self.header();
        summary.push_str(&format!(
            "- data: {}\n- load average at the start: {}\n",
            crate::settings_line(&bench.settings),
            report::loadavg()
        ));
        for (name, case, cache, joins) in enrich_cases {
            if bench.settings.wants(name) {
                summary.push_str(&self.run_case(name, &mut |lakejoin, tag| {
                    let case = format!("{case}-{tag}");
                    bench.enrich(&case, cache, *joins, &bench.orders, lakejoin)
                })?);
            }
        }
        if bench.settings.wants(STORM_CASE) {
            summary.push_str(&self.run_case(STORM_CASE, &mut |lakejoin, tag| {
                bench.enrich(
                    &format!("storm-{tag}"),
                    "partial",
                    1,
                    &bench.storm,
                    lakejoin,
                )
            })?);
        }
        if bench.settings.wants("lakejoin CDC ingest") {
            summary.push_str(&self.run_case("lakejoin CDC ingest", &mut |lakejoin, tag| {
                bench.ingest(&format!("ingest-{tag}"), lakejoin, false)
            })?);
        }
        if !summary.contains("\n## ") {
            bail!("CASES selects no lakejoin case (enrich, storm or CDC ingest) to compare");
        }
        summary.push_str(&format!(
            "\n- load average at the end: {}\n",
            report::loadavg()
        ));
        println!("\n{summary}");
        let path = bench.dir.join("COMPARISON.md");
        std::fs::write(&path, &summary).with_context(|| format!("writing {}", path.display()))?;
        println!("wrote {}", path.display());
        Ok(())
    }
}
