//! The hermetic test suite: in-memory and local object stores, librdkafka's mock cluster,
//! no external service. Each module is one theme and opens with its own doc.
//!
//! Why one binary: every test binary links all of lakejoin and its dependencies
//! statically (about 50 MB each in a debug build), and a link takes seconds. As 27
//! binaries they filled a CI machine's disk; as modules of one crate they link once.
//! Cargo.toml sets `autotests = false` so that the files here are not also built as
//! binaries of their own. Run one theme with `cargo test --test hermetic table_commit::`.

mod support;

mod bench_checks;
mod cdc_sink_batches;
mod changelog_mock;
mod commit_expiry_races;
mod commit_faults;
mod corrupt_files;
mod database_sync;
mod enrich_faults;
mod fuzz_corpus;
mod lookup_schema_change;
mod lookup_strategies;
mod manifest_fastavro;
mod merge_engines;
mod pipeline_mock;
mod pipeline_schema_evolution;
mod storage_faults;
mod table_changelog;
mod table_check;
mod table_commit;
mod table_evolve;
mod table_lookup;
mod table_maintenance;
mod table_model;
mod writer_fence;
