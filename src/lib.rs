//! lakejoin: CDC topics into Apache Paimon primary-key tables, and lookup-join enrichment
//! of fact topics against those tables, in one process beside Kafka.
//!
//! What [`table`] and [`lsm`] implement of the Paimon table format (file layouts, bytes,
//! the commit protocol, and where lakejoin differs from Java Paimon) is written down in
//! `docs/format.md`, whose section numbers the module docs cite.

// Library code returns errors; only tests may unwrap, expect or panic.
#![cfg_attr(
    not(test),
    deny(clippy::unwrap_used, clippy::expect_used, clippy::panic)
)]

pub mod cli;
pub mod codec;
pub mod config;
pub mod error;
pub mod kafka;
pub mod lookup;
pub mod lsm;
pub mod observe;
pub mod pipeline;
pub mod secret;
pub mod table;

pub use error::{Error, ErrorKind, Result};
