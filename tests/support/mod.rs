//! Helpers shared by the hermetic tests: a fault-injecting object store, a private copy
//! of the pypaimon fixture table and the corruptions applied to its files, and reading
//! topics back from librdkafka's mock cluster.

#![allow(dead_code)]

pub mod cdc;
pub mod faulty_store;
pub mod faulty_table;
pub mod topics;

use std::path::{Path, PathBuf};

/// The pypaimon warehouse under `tests/fixtures`.
pub fn fixture_warehouse() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/pypaimon")
}

/// A copy of the fixture warehouse (tests corrupt files in it).
pub fn copy_fixture() -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    copy_dir(&fixture_warehouse(), dir.path());
    dir
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("mkdir");
    for entry in std::fs::read_dir(from).expect("read_dir") {
        let entry = entry.expect("entry");
        let target = to.join(entry.file_name());
        if entry.file_type().expect("file type").is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).expect("copy");
        }
    }
}

/// Ways a file goes bad: cut short (a write that died), or overwritten with junk of the
/// same length (a bad disk, a wrong object).
#[derive(Debug, Clone, Copy)]
pub enum Corruption {
    TruncateHalf,
    DropLastByte,
    Empty,
    Junk,
}

pub const CORRUPTIONS: [Corruption; 4] = [
    Corruption::TruncateHalf,
    Corruption::DropLastByte,
    Corruption::Empty,
    Corruption::Junk,
];

pub fn corrupt(path: &Path, how: Corruption) {
    let bytes = std::fs::read(path).expect("read");
    let bad = match how {
        Corruption::TruncateHalf => bytes[..bytes.len() / 2].to_vec(),
        Corruption::DropLastByte => bytes[..bytes.len() - 1].to_vec(),
        Corruption::Empty => Vec::new(),
        Corruption::Junk => (0..bytes.len()).map(|i| (i * 131 % 251) as u8).collect(),
    };
    std::fs::write(path, bad).expect("write");
}
