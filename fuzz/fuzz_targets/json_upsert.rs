#![no_main]
//! Fuzz target `json_upsert`: see `harness/mod.rs` for the entry points it drives.

#[path = "../harness/mod.rs"]
mod harness;

libfuzzer_sys::fuzz_target!(|data: &[u8]| harness::json_upsert(data));
