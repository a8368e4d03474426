#![no_main]
//! Fuzz target `data_file`: see `harness/mod.rs` for the entry points it drives.

#[path = "../harness/mod.rs"]
mod harness;

libfuzzer_sys::fuzz_target!(|data: &[u8]| harness::data_file(data));
