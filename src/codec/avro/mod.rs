//! Avro binary ⇄ JSON objects, and the Confluent wire format.
//!
//! The binary encoding, its bounds (every length and count checked against the bytes
//! left, zero-byte items budgeted, schemas limited in depth and size, recursive ones
//! refused) and the schema compiler are the crate's Avro core, [`crate::avro`]; this
//! module is what Kafka records need on top of it: the meaning of logical types and of
//! the Kafka Connect attributes (`connect.name`) that say what a Debezium `long` means
//! (`logical`), and the JSON form of `datum_to_json`, decoded straight from the bytes
//! (`decode`) and encoded back (`encode`). apache-avro serves as the oracle in the tests.
//!
//! JSON form: `int`/`long` numbers, `float`/`double` numbers (non-finite as strings),
//! `bytes`/`fixed` base64, `enum` the symbol, unions the branch's value (no wrapper),
//! `date` `"YYYY-MM-DD"`, `time-*` `"HH:MM:SS[.f]"`, `timestamp-*`/`local-timestamp-*`
//! `"YYYY-MM-DD HH:MM:SS[.f]"`, `decimal` a string with the scale's digits, `uuid` the
//! hyphenated text, `duration` `{"months", "days", "millis"}`. Kafka Connect `Decimal`
//! bytes without a logical type are decimals too.

use std::fmt;

use serde_json::{Map, Value};

use super::coerce::Hints;
use super::error::{DecodeError, Part};
use super::row::SourceTypes;
use crate::avro::{Cursor, compile};
use crate::error::{Error, Result};

mod decode;
mod encode;
mod logical;

#[cfg(test)]
use encode::encode;
use encode::encode_record;
use logical::{Logical, connect_hint, type_name};

/// A compiled schema node, with the codec's meanings of logical types.
type Node = crate::avro::Node<Logical>;
type Field = crate::avro::Field<Logical>;

/// First byte of a Confluent-framed message.
pub(crate) const CONFLUENT_MAGIC: u8 = 0;

/// Splits a Confluent-framed message into its schema id and Avro body.
pub(crate) fn split_confluent(bytes: &[u8]) -> Result<(u32, &[u8]), DecodeError> {
    match bytes {
        [CONFLUENT_MAGIC, a, b, c, d, body @ ..] => {
            Ok((u32::from_be_bytes([*a, *b, *c, *d]), body))
        }
        [] => Err(DecodeError::malformed(Part::Payload, "empty payload")),
        [magic, ..] if *magic != CONFLUENT_MAGIC => Err(DecodeError::malformed(
            Part::Payload,
            format!("expected the Confluent magic byte 0, got {magic}"),
        )),
        _ => Err(DecodeError::malformed(
            Part::Payload,
            format!(
                "{} bytes are too short for a Confluent frame (magic byte + 4-byte schema id)",
                bytes.len()
            ),
        )),
    }
}

/// A compiled Avro schema: decodes Avro binary into JSON and encodes JSON into Avro.
#[derive(Debug, Clone)]
pub struct AvroSchema {
    root: Node,
    /// Connect semantics of the row fields of a Debezium envelope (`after`/`before`).
    row_hints: Option<Hints>,
    /// Source types of the same fields (what a column added for one becomes).
    row_types: Option<SourceTypes>,
}

impl AvroSchema {
    /// Compiles a schema's JSON text (an `.avsc` file or a registry's `schema` string).
    pub fn parse(text: &str) -> Result<Self> {
        let json: Value = serde_json::from_str(text)
            .map_err(|e| Error::Config(format!("Avro schema is not valid JSON: {e}")))?;
        let root = compile(&json).map_err(|e| Error::Config(format!("Avro schema: {e}")))?;
        let row_hints = debezium_row_hints(&root);
        let row_types = super::debezium::avro_row_types(&json);
        Ok(AvroSchema {
            root,
            row_hints,
            row_types,
        })
    }

    /// Semantics of the row fields when this is a Debezium envelope schema.
    pub(crate) fn row_hints(&self) -> Option<&Hints> {
        self.row_hints.as_ref()
    }

    /// Source types of the row fields when this is a Debezium envelope schema.
    pub(crate) fn row_types(&self) -> Option<&SourceTypes> {
        self.row_types.as_ref()
    }

    /// Decodes one Avro datum (all of `bytes`) into its JSON form.
    pub(crate) fn decode(&self, bytes: &[u8]) -> Result<Value, DecodeError> {
        let mut cur = Cursor::new(bytes);
        let value = decode::datum(&self.root, &mut cur)
            .map_err(|e| DecodeError::malformed(Part::Payload, format!("Avro: {e}")))?;
        if !cur.at_end() {
            return Err(DecodeError::malformed(
                Part::Payload,
                format!("Avro: {} bytes left after the datum", cur.remaining()),
            ));
        }
        Ok(value)
    }

    #[cfg(test)]
    /// Appends the Avro encoding of a JSON value to `out`.
    pub(crate) fn encode(&self, value: &Value, out: &mut Vec<u8>) -> Result<(), EncodeError> {
        encode(&self.root, value, false, out)
    }

    /// Appends the Avro encoding of a JSON object (a record) to `out`.
    pub(crate) fn encode_object(
        &self,
        object: &Map<String, Value>,
        out: &mut Vec<u8>,
    ) -> Result<(), EncodeError> {
        match &self.root {
            Node::Record(record) => encode_record(&record.fields, object, false, out),
            other => Err(EncodeError {
                path: String::new(),
                expected: type_name(other).to_string(),
                got: "an object".into(),
            }),
        }
    }
}

/// A value that does not fit the output schema.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct EncodeError {
    /// Dotted path of the field (`customer.id`, `items.3`); empty for the top level.
    pub(crate) path: String,
    /// The Avro type expected there.
    pub(crate) expected: String,
    /// The value found (JSON text, shortened) or what was wrong.
    pub(crate) got: String,
}

impl fmt::Display for EncodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let at = if self.path.is_empty() {
            "top level".to_string()
        } else {
            format!("field `{}`", self.path)
        };
        write!(f, "{at}: expected {}, got {}", self.expected, self.got)
    }
}

impl std::error::Error for EncodeError {}

impl From<EncodeError> for Error {
    fn from(e: EncodeError) -> Self {
        Error::Data(format!("Avro output: {e}"))
    }
}

impl EncodeError {
    fn new(node: &Node, got: impl Into<String>) -> Self {
        EncodeError {
            path: String::new(),
            expected: type_name(node).to_string(),
            got: got.into(),
        }
    }

    fn at(mut self, segment: &str) -> Self {
        self.path = if self.path.is_empty() {
            segment.to_string()
        } else {
            format!("{segment}.{}", self.path)
        };
        self
    }
}

/// The Connect semantics of the fields of the `after` (or `before`) record.
fn debezium_row_hints(root: &Node) -> Option<Hints> {
    let Node::Record(envelope) = root else {
        return None;
    };
    let row = ["after", "before"].into_iter().find_map(|name| {
        let field = envelope.fields.iter().find(|f| f.name == name)?;
        match &field.node {
            Node::Record(r) => Some(r),
            Node::Union(v) => v.iter().find_map(|n| match n {
                Node::Record(r) => Some(r),
                _ => None,
            }),
            _ => None,
        }
    })?;
    Some(
        row.fields
            .iter()
            .filter_map(|f| Some((f.name.clone(), connect_hint(&f.node)?)))
            .collect(),
    )
}

#[cfg(test)]
mod tests;
