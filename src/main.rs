//! The `lakejoin` binary: parse the command line, set up logging, dispatch.

#![cfg_attr(
    not(test),
    deny(clippy::unwrap_used, clippy::expect_used, clippy::panic)
)]

use std::process::ExitCode;

use clap::Parser;
use lakejoin::cli::{Cli, Outcome};

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    // Before any Kafka client exists: OpenSSL is initialised without its `atexit` cleanup.
    // Exit may come while a client's thread is still in a TLS handshake (a metadata request
    // to a broker that refuses the certificate outlives the exit grace below; any exit
    // after a failure abandons running clients); OpenSSL's cleanup would then free the
    // tables that handshake reads, and the process would die of SIGSEGV instead of
    // returning its exit code.
    openssl_sys::init();
    let cli = Cli::parse();
    if !cli.sets_up_logging() {
        lakejoin::observe::logging::init(lakejoin::config::LogFormat::Human, "warn");
    }
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::from(2);
        }
    };
    let result = runtime.block_on(cli.run());
    match &result {
        // Everything stopped; a client call still blocked on a worker thread (a metadata
        // request to an absent broker) gets a moment, not forever.
        Ok(Outcome::Success) => runtime.shutdown_timeout(std::time::Duration::from_secs(1)),
        // Exit now (second signal, shutdown timeout, failure): what still runs (a pipeline
        // mid-commit, a blocked client call) is abandoned; table commits are atomic, so
        // that is safe.
        _ => runtime.shutdown_background(),
    }
    match result {
        Ok(Outcome::Success) => ExitCode::SUCCESS,
        Ok(Outcome::NotFound | Outcome::Unhealthy | Outcome::Problems) => ExitCode::from(1),
        Ok(Outcome::Interrupted) => ExitCode::from(130),
        Err(e) => {
            eprintln!("error: {e}");
            // 1: the input or configuration is wrong; 2: something failed while running.
            ExitCode::from(match e.kind() {
                lakejoin::ErrorKind::Data | lakejoin::ErrorKind::Config => 1,
                _ => 2,
            })
        }
    }
}
