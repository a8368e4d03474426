//! The arithmetic of a comparison (compare.rs): each round's figures of the two variants,
//! the B/A ratio of every round, and their median and range (and for counted
//! instructions, the median B − A). Pure, so that the suite tests it
//! (tests/bench_checks.rs).

use std::fmt::Write as _;

/// What one run of a case gave.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Figures {
    pub rate: f64,
    /// CPU seconds per million records of the lakejoin process.
    pub cpu_per_million: Option<f64>,
    pub peak_rss_mib: Option<f64>,
    /// Instructions the lakejoin process executed per record, start-up included
    /// (callgrind.rs; `INSTRUCTIONS=1` only).
    pub instructions_per_record: Option<f64>,
}

pub fn shown(value: Option<f64>, decimals: usize) -> String {
    value.map_or("?".to_owned(), |v| format!("{v:.decimals$}"))
}

/// B/A of every round in which both variants have the figure.
pub fn paired_ratios(a: &[Option<f64>], b: &[Option<f64>]) -> Vec<f64> {
    a.iter()
        .zip(b)
        .filter_map(|(a, b)| match (a, b) {
            (Some(a), Some(b)) if *a > 0.0 => Some(b / a),
            _ => None,
        })
        .collect()
}

/// B − A of every round in which both variants have the figure.
pub fn paired_differences(a: &[Option<f64>], b: &[Option<f64>]) -> Vec<f64> {
    a.iter()
        .zip(b)
        .filter_map(|(a, b)| Some(b.as_ref()? - a.as_ref()?))
        .collect()
}

/// The median (the mean of the middle two of an even count); `None` of nothing.
pub fn median(values: &[f64]) -> Option<f64> {
    let mut sorted: Vec<f64> = values.iter().copied().filter(|v| v.is_finite()).collect();
    sorted.sort_by(f64::total_cmp);
    let n = sorted.len();
    match n {
        0 => None,
        _ if n % 2 == 1 => sorted.get(n / 2).copied(),
        _ => Some((sorted.get(n / 2 - 1)? + sorted.get(n / 2)?) / 2.0),
    }
}

/// Reads one figure of a run.
type Figure = fn(&Figures) -> Option<f64>;

/// A case's section: every round's figures, then per figure the median B/A and the
/// range of the ratios.
pub fn case_summary(name: &str, a: &[Figures], b: &[Figures]) -> String {
    let mut out = format!(
        "\n## {name}\n\n| round | A records/s | B records/s | A CPU-s per M | B CPU-s per M | A peak RSS MiB | B peak RSS MiB | A instructions per record | B instructions per record |\n| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n"
    );
    for (i, (a, b)) in a.iter().zip(b).enumerate() {
        let _ = writeln!(
            out,
            "| {} | {:.0} | {:.0} | {} | {} | {} | {} | {} | {} |",
            i + 1,
            a.rate,
            b.rate,
            shown(a.cpu_per_million, 2),
            shown(b.cpu_per_million, 2),
            shown(a.peak_rss_mib, 0),
            shown(b.peak_rss_mib, 0),
            shown(a.instructions_per_record, 0),
            shown(b.instructions_per_record, 0)
        );
    }
    out.push('\n');
    let figures: [(&str, Figure); 4] = [
        ("records/s", |f| Some(f.rate)),
        ("CPU-s per M records", |f| f.cpu_per_million),
        ("peak RSS", |f| f.peak_rss_mib),
        ("instructions per record", |f| f.instructions_per_record),
    ];
    for (label, get) in figures {
        let ratios = paired_ratios(
            &a.iter().map(get).collect::<Vec<_>>(),
            &b.iter().map(get).collect::<Vec<_>>(),
        );
        let line = match median(&ratios) {
            Some(m) => {
                let low = ratios.iter().copied().fold(f64::INFINITY, f64::min);
                let high = ratios.iter().copied().fold(f64::NEG_INFINITY, f64::max);
                format!(
                    "- {label}: B/A median {m:.3} over {} rounds (range {low:.3}–{high:.3})",
                    ratios.len()
                )
            }
            None => format!("- {label}: not measured"),
        };
        out.push_str(&line);
        out.push('\n');
    }
    // Counted instructions are nearly deterministic: what a change saves per record is
    // worth reading as a number, not only as a ratio diluted by start-up.
    let differences = paired_differences(
        &a.iter()
            .map(|f| f.instructions_per_record)
            .collect::<Vec<_>>(),
        &b.iter()
            .map(|f| f.instructions_per_record)
            .collect::<Vec<_>>(),
    );
    if let Some(m) = median(&differences) {
        let _ = writeln!(
            out,
            "- instructions per record, B − A: median {m:+.0} over {} rounds",
            differences.len()
        );
    }
    out
}
