//! lakejoin: CDC topics into Apache Paimon primary-key tables, and lookup-join enrichment
//! of fact topics against those tables, in one process beside Kafka.

pub mod avro;
pub mod cli;
pub mod codec;
pub mod config;
pub mod error;
pub mod kafka;
pub mod lookup;
pub mod lsm;
pub mod observe;
pub mod pipeline;
pub mod table;

pub use error::{Error, ErrorKind, Result};
