//! Command-line interface: `lakejoin run`, `validate`, `health`, `demo`, `table …`.

mod demo;
mod run;
mod table;
mod table_alter;
mod validate;

use clap::{Parser, Subcommand};

pub(crate) use table::TableCommand;

/// lakejoin: CDC into Apache Paimon tables and lookup-join enrichment beside Kafka.
#[derive(Debug, Parser)]
#[command(name = "lakejoin", version, about)]
pub struct Cli {
    #[command(subcommand)]
    pub(crate) command: Command,
}

#[derive(Debug, Subcommand)]
pub(crate) enum Command {
    /// Run the pipelines of a config file until Ctrl-C / SIGTERM.
    Run {
        /// Config file.
        #[arg(short = 'c', long = "config", default_value = "connectors.toml")]
        config: std::path::PathBuf,
    },
    /// Check a config file and list every problem.
    Validate {
        #[arg(short = 'c', long = "config", default_value = "connectors.toml")]
        config: std::path::PathBuf,
    },
    /// Ask a running `lakejoin run` whether it is live (or ready): exit 0 when it is,
    /// 1 when not. For container health checks.
    Health {
        /// Config file whose `[observe] listen` address is checked.
        #[arg(short = 'c', long = "config", default_value = "connectors.toml")]
        config: std::path::PathBuf,
        /// Check this host:port instead of the config's.
        #[arg(long)]
        address: Option<String>,
        /// Check readiness (/health/ready) instead of liveness (/health/live).
        #[arg(long)]
        ready: bool,
        /// How long to wait for the answer.
        #[arg(long, default_value = "5s", value_parser = parse_duration)]
        timeout: std::time::Duration,
    },
    /// The orders/customers scenario on an in-process mock Kafka; no services needed.
    Demo {
        /// How long to run, e.g. 20s, 2m.
        #[arg(long, default_value = "20s", value_parser = parse_duration)]
        duration: std::time::Duration,
    },
    /// Create, write, read and maintain Paimon tables.
    Table {
        #[command(subcommand)]
        command: TableCommand,
    },
}

/// What a command run ended with; `main` turns it into the exit code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    Success,
    /// The command ran but found nothing (e.g. `table get` of an absent key): exit 1.
    NotFound,
    /// `health`: the process is not live (or not ready): exit 1.
    Unhealthy,
    /// `table check` found missing or corrupt files: exit 1.
    Problems,
    /// `run` stopped at once on a second signal: exit 130.
    Interrupted,
}

fn parse_duration(text: &str) -> Result<std::time::Duration, crate::table::options::DurationError> {
    crate::config::duration::parse_duration(text)
}

impl Cli {
    /// Whether the command sets up logging itself (`run`, from its config file).
    pub fn sets_up_logging(&self) -> bool {
        matches!(self.command, Command::Run { .. })
    }

    pub async fn run(self) -> crate::Result<Outcome> {
        match self.command {
            Command::Table { command } => command.run().await,
            Command::Run { config } => run::run(&config).await,
            Command::Validate { config } => validate::run(&config).await,
            Command::Health {
                config,
                address,
                ready,
                timeout,
            } => run::health(&config, address.as_deref(), ready, timeout).await,
            Command::Demo { duration } => demo::run(duration).await,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn a_duration_without_a_unit_is_refused_by_every_flag() {
        let table = ["--warehouse", "memory://", "--table", "db.t"];
        let cases: Vec<Vec<&str>> = vec![
            vec!["demo", "--duration", "10"],
            vec!["health", "--timeout", "10"],
            [&["table", "expire"][..], &table, &["--older-than", "10"]].concat(),
            [
                &["table", "clean-orphans"][..],
                &table,
                &["--older-than", "10"],
            ]
            .concat(),
        ];
        for args in cases {
            let err = Cli::try_parse_from(std::iter::once("lakejoin").chain(args.iter().copied()))
                .map(|cli| format!("parsed: {cli:?}"))
                .unwrap_err()
                .to_string();
            assert!(
                err.contains("`10` has no unit") && err.contains("ms, s, min, h, d"),
                "{args:?}: {err}"
            );
        }
    }

    #[test]
    fn durations_with_a_unit_parse() {
        let cli = Cli::try_parse_from(["lakejoin", "demo", "--duration", "10s"]).unwrap();
        assert!(
            matches!(cli.command, Command::Demo { duration } if duration == Duration::from_secs(10)),
            "{cli:?}"
        );
        let cli = Cli::try_parse_from([
            "lakejoin",
            "table",
            "clean-orphans",
            "--warehouse",
            "memory://",
            "--table",
            "db.t",
            "--older-than",
            "12 h",
        ])
        .unwrap();
        assert!(format!("{cli:?}").contains("43200s"), "{cli:?}");
        // The defaults parse too.
        let cli = Cli::try_parse_from(["lakejoin", "demo"]).unwrap();
        assert!(
            matches!(cli.command, Command::Demo { duration } if duration == Duration::from_secs(20)),
            "{cli:?}"
        );
    }
}
