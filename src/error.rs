//! The crate's one error type.
//!
//! Every error has a [`ErrorKind`] so callers can decide what to do with it: a `Data`
//! error rejects one input record, a `Transient` error may be retried, `Config` and
//! `Fatal` stop the process with a message.

use std::fmt;

/// What the caller should do about an error.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// The configuration or a command-line argument is wrong; fix it and restart.
    Config,
    /// One input record (row, message, JSON line) is malformed; reject it, keep going.
    Data,
    /// A remote system failed in a way that may succeed on retry.
    Transient,
    /// Table files are corrupt or unsupported, or an invariant broke; stop.
    Fatal,
}

/// Errors of lakejoin.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A configuration value or command-line argument is invalid.
    #[error("{0}")]
    Config(String),
    /// An input value does not fit the table (wrong type, missing key, malformed JSON).
    #[error("{0}")]
    Data(String),
    /// A table file is malformed or uses a feature lakejoin cannot read.
    #[error("table format: {0}")]
    Format(String),
    /// A table file (schema, snapshot, manifest list, manifest, data file) exists but does
    /// not decode: truncated, corrupt or not what its name says. Names the file, so an
    /// operator knows which object to inspect or restore.
    #[error("corrupt table file {path}: {source}")]
    CorruptFile {
        path: String,
        #[source]
        source: Box<Error>,
    },
    /// A table does not exist where it was looked for.
    #[error("table not found: {0}")]
    TableNotFound(String),
    /// `create` found a table already there.
    #[error("table already exists: {0}")]
    TableExists(String),
    /// A snapshot id that the table does not have.
    #[error("snapshot {id} of {table} does not exist")]
    SnapshotNotFound { table: String, id: i64 },
    /// Another writer kept winning the race for the next snapshot id.
    #[error(
        "commit to {table} failed after {attempts} attempts: other writers kept committing first"
    )]
    CommitRetriesExhausted { table: String, attempts: u32 },
    /// Publishing a snapshot failed in a way that leaves open whether it landed (the
    /// request may have been applied with its response lost), and retries could not tell.
    /// The commit must be published again with the same prepared request, which first
    /// looks for it among the snapshots after `since`.
    #[error(
        "commit to {table} has an unknown outcome (it may or may not follow snapshot {since}): {message}"
    )]
    CommitOutcomeUnknown {
        table: String,
        since: i64,
        message: String,
    },
    /// A commit in doubt whose possible snapshots were expired, and of which files only
    /// it or its snapshot named are gone while no snapshot left shows it: the expiry of
    /// its own snapshot removed them, or orphan cleaning did. Publishing it again could
    /// apply it twice, dropping it could lose it; the writer stops, and a restart
    /// resumes from the table's offsets.
    #[error(
        "commit to {table} cannot be resolved: {message}; restarting resumes from the table's \
         offsets, which applies the commit's changes again if it did land (an aggregation \
         table would count them twice)"
    )]
    CommitOutcomeLost { table: String, message: String },
    /// A snapshot appeared that carries this writer's commit user but is not one of its
    /// commits: a fenced writer's last commit, or an earlier attempt that landed late. The
    /// offsets this writer resumed from are stale; it must restart from that snapshot.
    #[error(
        "snapshot {snapshot} of {table} was committed by another writer with commit user `{user}`; \
         restart to resume from it"
    )]
    ForeignCommitOfUser {
        table: String,
        user: String,
        snapshot: i64,
    },
    /// A CDC partition's position saved in the table is outside the topic's log: the
    /// records from there up to the log's start were deleted before this pipeline read
    /// them (or the topic was recreated), so the table may miss changes.
    #[error(
        "pipeline {pipeline}: topic {topic} partition {partition}: the table's saved position, \
         offset {saved}, is outside the log (offsets {low}..{high} remain); {consequence}. \
         Rebuild the table from a new snapshot of the source, or set \
         on_offset_out_of_range = \"earliest\" (or \"latest\") in [[cdc]] {pipeline} to \
         accept the loss and go on"
    )]
    OffsetOutOfRange {
        pipeline: String,
        topic: String,
        partition: i32,
        saved: i64,
        low: i64,
        high: i64,
        /// What is lost, in words.
        consequence: String,
    },
    /// Another process holds (or took over) the right to write this table.
    #[error("table {table} is written by {holder} (writer epoch {epoch}); this writer {action}")]
    WriterFenced {
        table: String,
        holder: String,
        epoch: u64,
        /// What this writer did about it (refused to start, stopped publishing).
        action: &'static str,
    },
    /// An object came back shorter than the store said it is (a cut-off response).
    #[error("object store: reading {location}: got {actual} of {expected} bytes")]
    TruncatedRead {
        location: String,
        expected: u64,
        actual: u64,
    },
    /// A COMPACT commit no longer fits the latest snapshot: a file it replaces is gone, or
    /// its output would overlap another file on the same level. The compaction must be
    /// planned again on the new snapshot.
    #[error("commit to {table} conflicts with a concurrent change: {reason}")]
    CommitConflict { table: String, reason: String },
    /// A compaction running in the background failed (it is retried after the next
    /// commit; the data committed so far is intact).
    #[error("background compaction of {table} failed: {message}")]
    BackgroundCompaction { table: String, message: String },
    /// The schema registry could not be asked (unreachable, 5xx, an answer that is not
    /// the registry's): the record waits, it is not bad.
    #[error("schema registry: {0}")]
    SchemaRegistry(String),
    /// A task lakejoin spawned (a blocking encode or merge, a pipeline) panicked or was
    /// cancelled: a bug or a shutdown, never bad input.
    #[error("{what} failed: {source}")]
    Task {
        what: String,
        #[source]
        source: tokio::task::JoinError,
    },
    /// An object-store request failed.
    #[error("object store: {context}: {source}")]
    Store {
        context: String,
        #[source]
        source: object_store::Error,
    },
    /// Parquet encode/decode failed.
    #[error("parquet: {context}: {source}")]
    Parquet {
        context: String,
        #[source]
        source: parquet::errors::ParquetError,
    },
    /// Arrow array construction or cast failed.
    #[error("arrow: {context}: {source}")]
    Arrow {
        context: String,
        #[source]
        source: arrow::error::ArrowError,
    },
    /// Avro encode/decode failed.
    #[error("avro: {context}: {source}")]
    Avro {
        context: String,
        #[source]
        source: Box<apache_avro::Error>,
    },
    /// JSON (schema or snapshot file) encode/decode failed.
    #[error("json: {context}: {source}")]
    Json {
        context: String,
        #[source]
        source: serde_json::Error,
    },
    /// A Kafka client call failed (broker unreachable, delivery failed, …); `context`
    /// says which call.
    #[error("kafka: {context}: {source}")]
    Kafka {
        context: String,
        #[source]
        source: rdkafka::error::KafkaError,
    },
    /// Local I/O failed (stdin, stdout).
    #[error("io: {context}: {source}")]
    Io {
        context: String,
        #[source]
        source: std::io::Error,
    },
}

impl Error {
    /// How the caller should treat this error.
    pub fn kind(&self) -> ErrorKind {
        match self {
            Error::Config(_) | Error::TableNotFound(_) | Error::TableExists(_) => ErrorKind::Config,
            Error::SnapshotNotFound { .. } => ErrorKind::Config,
            Error::Data(_) => ErrorKind::Data,
            Error::Store { source, .. } => match source {
                object_store::Error::NotFound { .. }
                | object_store::Error::InvalidPath { .. }
                | object_store::Error::NotSupported { .. }
                | object_store::Error::NotImplemented { .. }
                | object_store::Error::UnknownConfigurationKey { .. } => ErrorKind::Fatal,
                _ => ErrorKind::Transient,
            },
            Error::CommitRetriesExhausted { .. }
            | Error::CommitConflict { .. }
            | Error::BackgroundCompaction { .. }
            | Error::CommitOutcomeUnknown { .. }
            | Error::TruncatedRead { .. } => ErrorKind::Transient,
            Error::ForeignCommitOfUser { .. }
            | Error::CommitOutcomeLost { .. }
            | Error::WriterFenced { .. }
            | Error::Task { .. }
            | Error::OffsetOutOfRange { .. } => ErrorKind::Fatal,
            Error::Io { .. } | Error::Kafka { .. } | Error::SchemaRegistry(_) => {
                ErrorKind::Transient
            }
            Error::Format(_)
            | Error::CorruptFile { .. }
            | Error::Parquet { .. }
            | Error::Arrow { .. }
            | Error::Avro { .. }
            | Error::Json { .. } => ErrorKind::Fatal,
        }
    }

    /// The operating-system error under this one, if any: LocalFileSystem reports
    /// `No space left on device (os error 28)` and the like through its source chain.
    pub fn os_error(&self) -> Option<&std::io::Error> {
        let mut next: Option<&(dyn std::error::Error + 'static)> = Some(self);
        while let Some(error) = next {
            if let Some(io) = error.downcast_ref::<std::io::Error>() {
                return Some(io);
            }
            next = error.source();
        }
        None
    }

    /// Whether this is a missing snapshot or object: a file another writer's expiry or
    /// orphan cleaning removed meanwhile, which callers that list and then read expect.
    pub fn is_not_found(&self) -> bool {
        matches!(
            self,
            Error::SnapshotNotFound { .. }
                | Error::Store {
                    source: object_store::Error::NotFound { .. },
                    ..
                }
        )
    }

    /// Whether the warehouse refuses writes for a reason that no quick retry fixes but an
    /// operator can (or that clears on its own): the disk or quota is full, the file system
    /// is read-only, or access is denied. Writers keep their changes and retry with backoff
    /// until it clears.
    pub fn is_storage_unwritable(&self) -> bool {
        if let Error::Store {
            source:
                object_store::Error::PermissionDenied { .. }
                | object_store::Error::Unauthenticated { .. },
            ..
        } = self
        {
            return true;
        }
        self.os_error().is_some_and(|io| {
            matches!(
                io.kind(),
                std::io::ErrorKind::StorageFull
                    | std::io::ErrorKind::QuotaExceeded
                    | std::io::ErrorKind::ReadOnlyFilesystem
                    | std::io::ErrorKind::PermissionDenied
            )
        })
    }

    /// The object an object-store error is about (`writing <path>` → `<path>`).
    pub fn store_location(&self) -> Option<&str> {
        match self {
            Error::Store { context, .. } => context.split_once(' ').map(|(_, path)| path),
            _ => None,
        }
    }

    pub(crate) fn store(context: impl fmt::Display, source: object_store::Error) -> Self {
        Error::Store {
            context: context.to_string(),
            source,
        }
    }

    pub(crate) fn parquet(
        context: impl fmt::Display,
        source: parquet::errors::ParquetError,
    ) -> Self {
        Error::Parquet {
            context: context.to_string(),
            source,
        }
    }

    pub(crate) fn arrow(context: impl fmt::Display, source: arrow::error::ArrowError) -> Self {
        Error::Arrow {
            context: context.to_string(),
            source,
        }
    }

    pub(crate) fn avro(context: impl fmt::Display, source: apache_avro::Error) -> Self {
        Error::Avro {
            context: context.to_string(),
            source: Box::new(source),
        }
    }

    pub(crate) fn json(context: impl fmt::Display, source: serde_json::Error) -> Self {
        Error::Json {
            context: context.to_string(),
            source,
        }
    }

    /// This decode error, attributed to the table file at `path`.
    pub(crate) fn in_file(self, path: impl fmt::Display) -> Self {
        Error::CorruptFile {
            path: path.to_string(),
            source: Box::new(self),
        }
    }

    pub(crate) fn kafka(context: impl Into<String>, source: rdkafka::error::KafkaError) -> Self {
        Error::Kafka {
            context: context.into(),
            source,
        }
    }

    pub(crate) fn task(what: impl Into<String>, source: tokio::task::JoinError) -> Self {
        Error::Task {
            what: what.into(),
            source,
        }
    }

    pub(crate) fn format(message: impl Into<String>) -> Self {
        Error::Format(message.into())
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use super::*;

    /// An OS error wrapped the way LocalFileSystem wraps it (its own error type, boxed in
    /// object_store's `Generic`).
    #[derive(Debug)]
    struct Wrapped(std::io::Error);

    impl fmt::Display for Wrapped {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            write!(f, "Unable to copy data to file: {}", self.0)
        }
    }

    impl std::error::Error for Wrapped {
        fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
            Some(&self.0)
        }
    }

    fn local(errno: i32) -> Error {
        Error::store(
            "writing wh/db.db/t/bucket-0/data-1.parquet",
            object_store::Error::Generic {
                store: "LocalFileSystem",
                source: Box::new(Wrapped(std::io::Error::from_raw_os_error(errno))),
            },
        )
    }

    #[test]
    fn full_read_only_and_denied_warehouses_are_recognised_through_the_source_chain() {
        // ENOSPC, EDQUOT, EROFS, EACCES, EPERM (Linux numbers).
        for errno in [28, 122, 30, 13, 1] {
            let e = local(errno);
            assert!(e.is_storage_unwritable(), "{e}");
            assert_eq!(e.kind(), ErrorKind::Transient);
            assert_eq!(
                e.os_error().and_then(std::io::Error::raw_os_error),
                Some(errno)
            );
            assert_eq!(
                e.store_location(),
                Some("wh/db.db/t/bucket-0/data-1.parquet")
            );
        }
        // Other OS errors and store errors are not.
        assert!(!local(5).is_storage_unwritable(), "EIO");
        let generic = Error::store(
            "writing x",
            object_store::Error::Generic {
                store: "S3",
                source: "connection reset".into(),
            },
        );
        assert!(!generic.is_storage_unwritable());
        assert!(generic.os_error().is_none());
        let denied = Error::store(
            "writing x",
            object_store::Error::PermissionDenied {
                path: "x".into(),
                source: "403".into(),
            },
        );
        assert!(denied.is_storage_unwritable());
        assert_eq!(Error::Data("x".into()).store_location(), None);
    }
}
