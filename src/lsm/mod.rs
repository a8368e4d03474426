//! The log-structured merge tree on top of the table format: write buffer, merge engines,
//! flush, merge-on-read scan, compaction.

pub mod compact;
pub mod lookup;
pub mod merge;
pub mod reader;
pub mod writer;
