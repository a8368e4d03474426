//! The `lakejoin` binary: parse the command line, set up logging, dispatch.

use std::process::ExitCode;

use clap::Parser;
use lakejoin::cli::{Cli, Outcome};

fn main() -> ExitCode {
    let cli = Cli::parse();
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("LAKEJOIN_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .with_writer(std::io::stderr)
        .init();
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
    match runtime.block_on(cli.run()) {
        Ok(Outcome::Success) => ExitCode::SUCCESS,
        Ok(Outcome::NotFound) => ExitCode::from(1),
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
