//! The log-structured merge tree on top of the table format: write buffer, merge engines,
//! flush, merge-on-read scan, compaction, snapshot expiry and orphan-file cleaning.

mod auto_compact;
pub mod compact;
pub mod compact_task;
pub mod expire;
mod flush;
pub mod levels;
pub mod lookup;
pub mod merge;
pub mod orphan;
pub mod reader;
pub mod row_check;
pub mod universal;
pub mod writer;
