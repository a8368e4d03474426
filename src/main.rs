//! The `lakejoin` binary: parse the command line, set up logging, dispatch.

use std::process::ExitCode;

use clap::Parser;
use lakejoin::cli::{Cli, Outcome};

fn main() -> ExitCode {
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
        // Exit now: what is still running (a pipeline mid-commit, a blocked client call)
        // is abandoned; table commits are atomic, so that is safe.
        Ok(Outcome::Interrupted) => runtime.shutdown_background(),
        // Give closing clients (leaving consumer groups) a moment, not forever.
        _ => runtime.shutdown_timeout(std::time::Duration::from_secs(5)),
    }
    match result {
        Ok(Outcome::Success) => ExitCode::SUCCESS,
        Ok(Outcome::NotFound | Outcome::Unhealthy) => ExitCode::from(1),
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
