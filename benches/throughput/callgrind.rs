//! Counting the instructions a lakejoin executes, with valgrind's callgrind
//! (`INSTRUCTIONS=1`; compare.rs runs every measured lakejoin process under it).
//!
//! Why: on these shared machines a case's CPU time per record moves by a quarter from
//! one run to the next, and even paired rounds (compare.rs) resolve a 40% change, not a
//! 5% one. The instructions a process executes hardly depend on the machine: two runs of
//! one binary on the same data agree to about 1%, so what a small change to the record
//! path saves shows as a number of instructions per record.
//!
//! What it does not say: under callgrind a process runs about 50 times slower and its
//! threads one at a time, so the records/s, CPU and RSS of such a run mean nothing, and
//! librdkafka batches differently than at full speed. Instructions are not time either:
//! cache misses, lock contention and traffic between cores are not counted. Use it to
//! tell small changes apart, and a native comparison to confirm what they are worth.

use std::path::Path;
use std::process::Command;

/// How much longer a step may take under callgrind than the harness allows natively.
pub const SLOWDOWN: u32 = 10;

/// The command running `binary` (its arguments still to add) under callgrind, counting
/// into `out`.
pub fn command(valgrind: &Path, out: &Path, binary: &Path) -> Command {
    let mut command = Command::new(valgrind);
    command
        .arg("--tool=callgrind")
        .arg(format!("--callgrind-out-file={}", out.display()))
        .arg(binary);
    command
}

/// The instructions counted in a callgrind output file (its `totals:` line, or the
/// `summary:` line that older versions write instead).
pub fn total_instructions(text: &str) -> Option<u64> {
    let line = text
        .lines()
        .find_map(|l| l.strip_prefix("totals:"))
        .or_else(|| text.lines().find_map(|l| l.strip_prefix("summary:")))?;
    line.split_whitespace().next()?.parse().ok()
}
