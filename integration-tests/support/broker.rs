//! A real Kafka-protocol broker for the pipeline tests: topics, producing, reading a topic
//! back, and `lakejoin run` as a child process that can be stopped or killed.
//!
//! The broker comes from `KAFKA_BOOTSTRAP`: `scripts/test.sh` starts Apache Kafka on free
//! loopback ports and exports it; point it at `docker/docker-compose.yml`'s Kafka to run
//! the same tests there. Topic names get a random suffix so runs never see each other's data.
//!
//! The parts live in submodules, re-exported here so every test names them
//! `support::broker::…`: `admin` (topics, records, ACLs, offsets and groups, Kafka's own
//! tools), `clients` (a producer and a topic reader), `process` (a deployment and its
//! `lakejoin run` process, with its HTTP endpoint) and `kafka_broker` (a broker of a
//! test's own). This file holds the small helpers they all use.

mod admin;
mod clients;
mod kafka_broker;
mod process;

// Every test target includes all of `support` but uses only some of it (hence its
// `#![allow(dead_code)]`), so a target may leave one of these re-exports unused.
#[allow(unused_imports)]
pub use {admin::*, clients::*, kafka_broker::*, process::*};

use std::net::TcpListener;
use std::time::{Duration, Instant};

/// The broker's bootstrap address (`host:port`).
pub fn bootstrap() -> String {
    std::env::var("KAFKA_BOOTSTRAP").unwrap_or_else(|_| {
        panic!(
            "KAFKA_BOOTSTRAP is not set: run `scripts/test.sh` (it starts Apache Kafka on \
             free loopback ports), or point KAFKA_BOOTSTRAP at a Kafka broker"
        )
    })
}

/// A name unique to this run: `<base>-<8 hex digits>`.
pub fn unique(base: &str) -> String {
    format!("{base}-{}", &uuid::Uuid::new_v4().simple().to_string()[..8])
}

/// Polls `condition` every 100 ms until it holds; panics after 90 s.
pub fn wait_until(what: &str, mut condition: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(90);
    while !condition() {
        assert!(Instant::now() < deadline, "timed out waiting until {what}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

pub fn tail(text: &str, lines: usize) -> String {
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

/// A loopback port nobody listens on (free when this returns).
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port()
}
