//! Replays the committed fuzz corpus (`fuzz/corpus/<target>/`) and every input that once
//! crashed a target (`fuzz/regressions/<target>/`) through the same entry points as the
//! cargo-fuzz targets (`fuzz/harness/mod.rs`), on the stable toolchain, so CI catches a
//! regression without cargo-fuzz or nightly.

#[path = "../fuzz/harness/mod.rs"]
mod harness;

use std::path::{Path, PathBuf};

fn inputs(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut files: Vec<PathBuf> = entries
        .map(|e| e.expect("corpus entry").path())
        .filter(|p| p.is_file())
        .collect();
    files.sort();
    files
}

#[test]
fn every_corpus_and_crash_input_is_handled_without_panicking() {
    let fuzz = Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz");
    let mut summary = Vec::new();
    for (target, run) in harness::TARGETS {
        let corpus = inputs(&fuzz.join("corpus").join(target));
        assert!(
            corpus.len() >= 3,
            "fuzz/corpus/{target} holds {} inputs; seed it (scripts/fuzz.sh)",
            corpus.len()
        );
        let crashes = inputs(&fuzz.join("regressions").join(target));
        for file in corpus.iter().chain(&crashes) {
            let bytes = std::fs::read(file).expect("corpus file");
            // A panic here names the input: rerun it with
            // `cargo +nightly fuzz run <target> <file>` to debug.
            eprintln!("{target}: {}", file.display());
            run(&bytes);
        }
        summary.push(format!("{target}: {} + {}", corpus.len(), crashes.len()));
    }
    eprintln!("replayed {}", summary.join(", "));
}
