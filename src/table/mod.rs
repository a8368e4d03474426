//! The Apache Paimon table format (pure encode/decode of its files) and the object-store
//! `Table` handle that reads snapshots and commits new ones.

pub mod binary_row;
pub mod bucket;
pub mod data_file;
pub mod datum;
pub mod manifest;
pub mod options;
pub mod path;
pub mod schema;
pub mod snapshot;
pub mod types;
