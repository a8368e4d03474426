//! The one Avro core: the binary encoding, schemas and object container files, for both
//! Avro users of the crate: `codec::avro` (Confluent-framed Kafka records ⇄ JSON, with
//! Debezium/Connect meanings) and `table::manifest` (Paimon's manifest files).
//!
//! Why one core: both read untrusted bytes in the same encoding, so the bounds that make
//! that safe (every length and count checked against the bytes left, zero-byte items
//! budgeted, schemas limited in depth and size, decompression capped) live, and are
//! tested and fuzzed, in one place. Why not `apache_avro` for reading: it sizes buffers
//! from length prefixes before reading them, builds an owned `Value` tree, drops the
//! attributes that say what a Debezium `long` means and loses a decimal's scale.
//! apache-avro still compresses blocks when writing, and is the oracle in tests.
//!
//! What stays above: what a logical type or a Connect attribute means ([`Annotation`]:
//! the compiler keeps it, the layer above decides), the JSON mapping, Paimon's layouts.
//! This module imports nothing from the rest of the crate.

mod block;
mod container;
mod cursor;
mod schema;
mod value;
mod write;

#[cfg(test)]
mod tests;

use std::fmt;

pub(crate) use block::BlockCodec;
pub(crate) use container::{Container, ContainerWriter, read_container};
pub(crate) use cursor::Cursor;
pub(crate) use schema::{Annotation, Field, Node, Record, compile, parse};
pub(crate) use value::{Val, read};
pub(crate) use write::{put_bytes, put_collection, put_items, put_long, put_strings};

/// Deepest schema nesting accepted; it also bounds the recursion of decoding.
pub(crate) const MAX_DEPTH: usize = 64;
/// Most nodes a compiled schema may have. Named types are copied where they are
/// referenced, so a hostile schema could otherwise grow exponentially.
pub(crate) const MAX_NODES: usize = 10_000;
/// Most zero-byte items (nulls, empty records) the arrays and maps of one datum may hold
/// together: they cost no input, so the input cannot bound them.
pub(crate) const MAX_ZERO_SIZE_ITEMS: usize = 1 << 16;

/// What went wrong reading or writing Avro.
#[derive(Debug)]
pub(crate) enum Error {
    /// The bytes or the schema are not valid Avro (or not what the schema says); the
    /// message names what is wrong and, for bytes, at which offset.
    Invalid(String),
    /// A block could not be compressed while writing a container file.
    Compress(Box<apache_avro::Error>),
}

pub(crate) type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// An [`Error::Invalid`] saying `message`.
    pub(crate) fn invalid(message: impl Into<String>) -> Self {
        Error::Invalid(message.into())
    }

    /// The same error, said to be inside `what` (`field `a.b``, `schema`).
    pub(crate) fn within(self, what: impl fmt::Display) -> Self {
        match self {
            Error::Invalid(m) => Error::Invalid(format!("{what}: {m}")),
            other => other,
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Invalid(m) => f.write_str(m),
            Error::Compress(e) => write!(f, "compressing a block: {e}"),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Invalid(_) => None,
            Error::Compress(e) => Some(e.as_ref()),
        }
    }
}
