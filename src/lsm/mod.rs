//! The log-structured merge tree on top of the table format: write buffer, merge engines,
//! flush, merge-on-read scan, compaction, snapshot expiry and orphan-file cleaning.

mod auto_compact;
pub mod compact;
pub mod compact_task;
pub mod expire;
pub mod levels;
pub mod lookup;
pub mod merge;
pub mod orphan;
pub mod reader;
pub mod universal;
pub mod writer;
