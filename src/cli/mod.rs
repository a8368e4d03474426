//! Command-line interface: `lakejoin table …` (and later `run`, `validate`, `demo`).

mod table;

use clap::{Parser, Subcommand};

pub use table::TableCommand;

/// lakejoin: CDC into Apache Paimon tables and lookup-join enrichment beside Kafka.
#[derive(Debug, Parser)]
#[command(name = "lakejoin", version, about)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
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
}

impl Cli {
    pub async fn run(self) -> crate::Result<Outcome> {
        match self.command {
            Command::Table { command } => command.run().await,
        }
    }
}
