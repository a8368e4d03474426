//! lakejoin: CDC topics into Apache Paimon primary-key tables, and lookup-join enrichment
//! of fact topics against those tables, in one process beside Kafka.
//!
//! # Layers
//!
//! Modules depend downwards only:
//!
//! ```text
//! cli  →  pipeline  →  kafka | lookup  →  codec | lsm  →  table  →  error
//!                  (config, observe and secret are used from every layer above them)
//! ```
//!
//! - [`cli`]: the commands (`run`, `validate`, `table …`, `health`).
//! - [`pipeline`]: `pipeline::build` turns a `connectors.toml` into tables, decoders,
//!   encoders and lookups; [`pipeline::start`] spawns the CDC and enrich pipelines.
//! - `kafka`: consumers and the producer, with librdkafka's settings and log.
//! - [`lookup`]: the join caches (`full`, `partial`, `none`) and how they follow the table.
//! - [`codec`]: Debezium, Canal, Maxwell, JSON and Avro records into row changes and facts.
//! - [`lsm`]: the log-structured merge tree over a table: writer, merge engines,
//!   merge-on-read, point lookups, compaction, expiry.
//! - [`table`]: the Paimon table format itself: schemas, snapshots, manifests, data files.
//!
//! # The two data paths
//!
//! A change: a CDC record is decoded ([`codec::CdcDecoder`]), checked once
//! ([`lsm::row_check::RowCheck`]; what the table rejects is a dead letter), queued to its
//! table's single writer ([`pipeline::cdc::TableSink`], [`lsm::writer::TableWriter`]), and
//! committed as a snapshot that also carries the Kafka offsets it covers, so a restart
//! resumes exactly there. Each commit then reaches this process's lookups
//! (`lookup::TableLookups::follow_commits`).
//!
//! A fact: a fact record is decoded ([`codec::FactDecoder`]), joined a poll batch at a
//! time (`pipeline::enrich::facts::Enricher`, `pipeline::enrich::Join::find_many`
//! against [`lookup::LookupTable`]), encoded and produced; its offset is committed once it
//! and every fact before it are delivered (at least once).
//!
//! `docs/architecture.md` names the function at each hop. What [`table`] and [`lsm`]
//! implement of the Paimon table format (file layouts, bytes, the commit protocol, and
//! where lakejoin differs from Java Paimon) is written down in `docs/format.md`, whose
//! section numbers the module docs cite.
//!
//! # Public API
//!
//! The library is public for its own consumers: the binary (`src/main.rs`, through [`cli`]),
//! the hermetic tests (`tests/`), the integration tests (`integration-tests/`), the
//! benchmarks (`benches/`) and the fuzz harness (`fuzz/harness/`). What they name is
//! public, and so is what a program embedding lakejoin needs beside it: the types in those
//! items' signatures, the fields of format records and reports (a [`table::snapshot::Snapshot`],
//! an [`lsm::compact::CompactionReport`]), and plain accessors of public types. So [`cli`],
//! [`config`], [`pipeline`] ([`pipeline::start`], [`pipeline::cdc`]), [`observe`] (logging,
//! metrics), [`codec`] (the decoders), [`lookup`] (the join caches), [`lsm`] (writer,
//! reader, compaction, expiry, orphan cleaning, point lookups), [`table`] (warehouses,
//! tables and the Paimon format's records) and [`error`] are public modules.
//!
//! Everything else is `pub(crate)`: the `avro`, `kafka` and `secret` modules, the
//! submodules that implement the public ones (`pipeline::enrich`, `lookup::full`,
//! `lsm::compact_task`, …), and the internal state of public types. The
//! `unreachable_pub` and `unnameable_types` lints keep it so: a `pub` item must be
//! reachable from the crate root, and a public type that a public signature uses must be
//! nameable (re-exported where it is defined in a private module).

#![warn(unreachable_pub, unnameable_types)]
// Library code returns errors; only tests may unwrap, expect or panic.
#![cfg_attr(
    not(test),
    deny(clippy::unwrap_used, clippy::expect_used, clippy::panic)
)]

pub(crate) mod avro;
pub mod cli;
pub mod codec;
pub mod config;
pub mod error;
pub(crate) mod kafka;
pub mod lookup;
pub mod lsm;
pub mod observe;
pub mod pipeline;
pub(crate) mod secret;
pub mod table;

pub use error::{Error, ErrorKind, Result};
