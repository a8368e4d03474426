//! A fact on its way through the joins of an enrich pipeline.
//!
//! A JSON fact keeps its payload bytes: the joins read only the fields they need (each
//! parsed on its own when asked for), and the JSON output is the payload with the joined
//! fields spliced in before its closing brace. The fact is never parsed into a tree nor
//! serialised again, which is most of the work of enriching a record. Facts that cannot
//! be spliced are trees: Avro facts, JSON whose keys hold escapes, and a fact whose join
//! output would replace one of its own fields (a tree replaces it in place, as before).
//!
//! Both forms give the same results: [`Fact::get`] the same values, and
//! [`Fact::encode`] JSON that parses to the same object in the same field order (the
//! splice keeps the payload's own spelling of numbers and whitespace).

use std::borrow::Cow;
use std::ops::Range;

use serde_json::{Map, Value};

use super::OutputEncoder;
use super::avro::EncodeError;
use super::error::{DecodeError, Part};
use super::json_scan::{object_fields, plain_ascii_run, plain_run, serde_fields};
use super::json_value::{lookup_path, parse_object};
use crate::table::binary_row::FieldValue;
use crate::table::datum::{Datum, datum_to_json};
use crate::table::types::DataType;

/// A decoded fact plus the fields its joins added so far.
#[derive(Debug, Clone)]
pub enum Fact<'a> {
    /// The payload's own bytes (a JSON object whose keys have no escapes).
    Raw(RawFact<'a>),
    Tree(Map<String, Value>),
}

/// A value of a raw fact that is valid JSON but does not fit a `serde_json::Value`: a
/// number out of its range (`1e400`). The raw form never needs to read it unless asked
/// for it, or for the whole tree; then the fact is bad.
#[derive(Debug, thiserror::Error)]
pub(crate) enum FactValueError {
    /// A top-level field asked for by name.
    #[error("field `{path}`: {source}")]
    Field {
        path: String,
        #[source]
        source: serde_json::Error,
    },
    /// The payload as a whole, when a tree of it was needed.
    #[error(transparent)]
    Payload(DecodeError),
    /// A string read from a stored row that is not UTF-8: the table's fault, not the
    /// fact's.
    #[error("field `{path}`: the stored string is not UTF-8: {source}")]
    StoredText {
        path: String,
        #[source]
        source: std::str::Utf8Error,
    },
}

/// The name of a field a join adds, with its JSON spelling (quoted, escaped where needed)
/// made once: it is spliced into every output record, and escaping it there was a scan
/// of the name per field per record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct FieldName {
    name: String,
    json: Box<[u8]>,
    /// The name's bit in a [`NameSet`].
    bit: u64,
}

impl FieldName {
    pub(crate) fn new(name: impl Into<String>) -> Self {
        let name = name.into();
        let mut json = Vec::with_capacity(name.len() + 2);
        write_json_str(&mut json, &name);
        FieldName {
            bit: NameSet::bit(&name),
            name,
            json: json.into_boxed_slice(),
        }
    }

    pub(crate) fn as_str(&self) -> &str {
        &self.name
    }
}

#[derive(Debug, Clone)]
pub struct RawFact<'a> {
    payload: &'a [u8],
    /// The payload's top-level fields, values unparsed.
    fields: RawFields<'a>,
    /// Joined fields, in the order they were added (a name at most once), each with
    /// where its value's JSON text lies in `added_json`. Names are borrowed from the join
    /// that adds them: no copy per fact, and no reference count that every worker thread
    /// writes to.
    added: Vec<(&'a FieldName, Range<usize>)>,
    /// The names in `added`.
    added_names: NameSet,
    /// The joined values as JSON text, back to back: a column's value is written once,
    /// straight from the table's datum, and spliced as it is.
    added_json: Vec<u8>,
}

impl<'a> Fact<'a> {
    /// The JSON object in `payload` kept as bytes, when that is possible (`None`: parse
    /// it as a tree instead, which also gives the error of a payload that is not one).
    pub(crate) fn raw(payload: &'a [u8]) -> Option<Self> {
        // UTF-8 checked once for the whole payload, not once per string.
        let text = std::str::from_utf8(payload).ok()?;
        // The scanner takes the usual shapes; `serde_json` whatever else it can.
        let fields = RawFields::new(object_fields(text).or_else(|| serde_fields(text))?);
        Some(Fact::Raw(RawFact {
            payload,
            fields,
            added: Vec::new(),
            added_names: NameSet::default(),
            added_json: Vec::new(),
        }))
    }

    /// The value at a dotted path, as [`lookup_path`] finds it in the fact's tree. `Err`
    /// when the value is not readable as a JSON value (a number out of range).
    pub(crate) fn get(&self, path: &str) -> Result<Option<Cow<'_, Value>>, FactValueError> {
        let raw = match self {
            Fact::Tree(map) => return Ok(lookup_path(map, path).map(Cow::Borrowed)),
            Fact::Raw(raw) => raw,
        };
        if let Some((_, range)) = raw.added.iter().find(|(name, _)| name.as_str() == path) {
            return raw
                .added_value(range)
                .map(|v| Some(Cow::Owned(v)))
                .map_err(|source| FactValueError::Field {
                    path: path.to_string(),
                    source,
                });
        }
        if let Some(value) = raw.fields.get(path) {
            // Most join keys are integers: read without the JSON parser.
            if let Some(n) = plain_integer(value) {
                return Ok(Some(Cow::Owned(Value::from(n))));
            }
            return serde_json::from_str(value)
                .map(|v| Some(Cow::Owned(v)))
                .map_err(|source| FactValueError::Field {
                    path: path.to_string(),
                    source,
                });
        }
        if !path.contains('.') {
            return Ok(None);
        }
        // A path into a nested value (rare): look it up in the tree.
        let tree = raw.to_tree()?;
        Ok(lookup_path(&tree, path).cloned().map(Cow::Owned))
    }

    /// Appends to `out` the bytes of the value at `path` as a record key: a string's
    /// text, any other value's JSON; `false` (nothing appended) when there is no such
    /// value. A raw fact's own string without escapes, or integer, already is those bytes
    /// in the payload, and is copied without parsing it into a `Value` and writing it out
    /// again.
    pub(crate) fn write_record_key(
        &self,
        path: &str,
        out: &mut Vec<u8>,
    ) -> Result<bool, FactValueError> {
        if let Fact::Raw(raw) = self
            && !raw.added.iter().any(|(name, _)| name.as_str() == path)
            && let Some(value) = raw.fields.get(path)
            && let Some(text) = key_text_as_written(value)
        {
            out.extend_from_slice(text);
            return Ok(true);
        }
        let Some(value) = self.get(path)? else {
            return Ok(false);
        };
        match value.as_ref() {
            Value::String(s) => out.extend_from_slice(s.as_bytes()),
            // Writing a `Value` into a Vec cannot fail.
            other => {
                let _ = serde_json::to_writer(&mut *out, other);
            }
        }
        Ok(true)
    }

    /// [`Fact::write_record_key`] into a buffer of its own.
    #[cfg(test)]
    pub(crate) fn record_key(&self, path: &str) -> Result<Option<Vec<u8>>, FactValueError> {
        let mut out = Vec::new();
        Ok(self.write_record_key(path, &mut out)?.then_some(out))
    }

    /// Sets a field, as inserting into the fact's tree would: a new name is appended, an
    /// existing one keeps its place. `Err` when replacing a field of a payload that cannot
    /// be read as a tree.
    pub(crate) fn insert(
        &mut self,
        name: &'a FieldName,
        value: Value,
    ) -> Result<(), FactValueError> {
        match self {
            Fact::Tree(map) => {
                map.insert(name.as_str().to_owned(), value);
            }
            Fact::Raw(raw) if raw.fields.has(name) => {
                let mut map = raw.to_tree()?;
                map.insert(name.as_str().to_owned(), value);
                *self = Fact::Tree(map);
            }
            Fact::Raw(raw) => raw.add(name, |out| {
                // Writing a `Value` into a Vec cannot fail.
                let _ = serde_json::to_writer(out, &value);
            }),
        }
        Ok(())
    }

    /// [`Fact::insert`] of a table column's value: a raw fact writes its JSON text
    /// straight from the datum (no `Value`, no copy of a string column).
    pub(crate) fn insert_datum(
        &mut self,
        name: &'a FieldName,
        datum: &Datum,
        ty: &DataType,
    ) -> Result<(), FactValueError> {
        match self {
            Fact::Raw(raw) if !raw.fields.has(name) => {
                raw.add(name, |out| write_datum_json(out, datum, ty));
                Ok(())
            }
            _ => self.insert(name, datum_to_json(datum, ty)),
        }
    }

    /// [`Fact::insert_datum`] of a column read in place from a looked-up row: a string
    /// is written straight from the row's bytes.
    pub(crate) fn insert_field(
        &mut self,
        name: &'a FieldName,
        value: FieldValue<'_>,
        ty: &DataType,
    ) -> Result<(), FactValueError> {
        let utf8 = |text| {
            std::str::from_utf8(text).map_err(|source| FactValueError::StoredText {
                path: name.as_str().to_owned(),
                source,
            })
        };
        match (self, value) {
            (Fact::Raw(raw), FieldValue::Text(text)) if !raw.fields.has(name) => {
                // Plain ASCII (the usual string) is UTF-8 and needs no escape: one scan
                // finds both, and the bytes are copied whole.
                if plain_ascii_run(text) == text.len() {
                    raw.add(name, |out| write_plain_json_str(out, text));
                } else {
                    let text = utf8(text)?;
                    raw.add(name, |out| write_json_str(out, text));
                }
                Ok(())
            }
            (fact, FieldValue::Text(text)) => {
                fact.insert(name, Value::String(utf8(text)?.to_owned()))
            }
            (fact, FieldValue::Null) => fact.insert_datum(name, &Datum::Null, ty),
            (fact, FieldValue::Datum(datum)) => fact.insert_datum(name, &datum, ty),
        }
    }

    /// Makes room for `fields` more joined fields (a join adds all of its own at once)
    /// and about `json_bytes` of their JSON text, so that adding them does not grow the
    /// buffers step by step.
    pub(crate) fn reserve(&mut self, fields: usize, json_bytes: usize) {
        if let Fact::Raw(raw) = self {
            raw.added.reserve(fields);
            raw.added_json.reserve(json_bytes);
        }
    }

    /// Appends the output record's bytes to `out` (which may already hold its key).
    pub(crate) fn encode_into(
        &self,
        encoder: &OutputEncoder,
        out: &mut Vec<u8>,
    ) -> Result<(), EncodeError> {
        match (self, encoder) {
            (Fact::Raw(raw), OutputEncoder::Json) => {
                raw.splice_into(out);
                Ok(())
            }
            (Fact::Raw(raw), _) => encoder.encode_into(
                &raw.to_tree().map_err(|e| EncodeError {
                    path: String::new(),
                    expected: "a JSON object".into(),
                    got: e.to_string(),
                })?,
                out,
            ),
            (Fact::Tree(map), _) => encoder.encode_into(map, out),
        }
    }

    /// [`Fact::encode_into`] a buffer of its own.
    #[cfg(test)]
    pub(crate) fn encode(&self, encoder: &OutputEncoder) -> Result<Vec<u8>, EncodeError> {
        let mut out = Vec::new();
        self.encode_into(encoder, &mut out)?;
        Ok(out)
    }

    /// About the size of the fact's JSON output (exact for a raw fact), to size the
    /// buffer it is written into.
    pub(crate) fn encoded_len_hint(&self) -> usize {
        match self {
            Fact::Raw(raw) => raw.spliced_len(),
            // A tree's size is not known without writing it.
            Fact::Tree(_) => 256,
        }
    }

    #[cfg(test)]
    /// The fact as a tree.
    pub(crate) fn into_tree(self) -> Result<Map<String, Value>, FactValueError> {
        match self {
            Fact::Tree(map) => Ok(map),
            Fact::Raw(raw) => raw.to_tree(),
        }
    }
}

/// A JSON object's top-level fields in payload order, values unparsed. A list, not a
/// hash map: a fact has a handful of fields and a join asks for one or two, so a scan
/// is cheaper than hashing every key of every fact (the map's inserts and growth were a
/// tenth of an enrich pipeline's CPU). A repeated key reads as its last value, as in a
/// parsed tree.
#[derive(Debug, Clone, Default)]
struct RawFields<'a> {
    fields: Vec<(&'a str, &'a str)>,
    names: NameSet,
}

impl<'a> RawFields<'a> {
    fn new(fields: Vec<(&'a str, &'a str)>) -> Self {
        let mut names = NameSet::default();
        for (name, _) in &fields {
            names.insert_bit(NameSet::bit(name));
        }
        RawFields { fields, names }
    }

    /// A field's value as JSON text.
    fn get(&self, name: &str) -> Option<&'a str> {
        self.fields
            .iter()
            .rev()
            .find(|(k, _)| *k == name)
            .map(|(_, v)| *v)
    }

    /// Whether the payload has a field of a join's output name: asked for every column
    /// a join adds, and nearly always answered by the name set without a scan.
    fn has(&self, name: &FieldName) -> bool {
        self.names.may_have(name.bit) && self.get(name.as_str()).is_some()
    }

    fn is_empty(&self) -> bool {
        self.fields.is_empty()
    }
}

/// A set of field names kept as one bit each (of 64, by a cheap hash of the name): a
/// name whose bit is clear is not in the set; one whose bit is set has to be looked for.
#[derive(Debug, Clone, Copy, Default)]
struct NameSet(u64);

impl NameSet {
    /// The name's length and its last two bytes, mixed by a multiplication (Fibonacci
    /// hashing), pick the bit: cheap, and they tell apart the names of one record, which
    /// often share a prefix (`customer_id`, `customer_name`).
    fn bit(name: &str) -> u64 {
        let bytes = name.as_bytes();
        let (last, before) = match bytes {
            [.., before, last] => (*last, *before),
            [last] => (*last, 0),
            [] => (0, 0),
        };
        let mixed = (bytes.len() as u64 | u64::from(last) << 32 | u64::from(before) << 40)
            .wrapping_mul(0x9E37_79B9_7F4A_7C15);
        1 << (mixed >> 58)
    }

    fn insert_bit(&mut self, bit: u64) {
        self.0 |= bit;
    }

    fn may_have(self, bit: u64) -> bool {
        self.0 & bit != 0
    }
}

impl<'a> RawFact<'a> {
    /// The payload as a tree plus the added fields. The payload is valid JSON (it parsed
    /// as a raw fact), but a number out of range does not fit a `Value`.
    fn to_tree(&self) -> Result<Map<String, Value>, FactValueError> {
        let mut map = parse_object(self.payload, Part::Payload).map_err(FactValueError::Payload)?;
        for (name, range) in &self.added {
            let value = self
                .added_value(range)
                .map_err(|source| FactValueError::Field {
                    path: name.as_str().to_owned(),
                    source,
                })?;
            map.insert(name.as_str().to_owned(), value);
        }
        Ok(map)
    }

    /// An added field's value, parsed from its text (written from a `Value` or a datum,
    /// so it parses).
    fn added_value(&self, range: &Range<usize>) -> serde_json::Result<Value> {
        serde_json::from_slice(self.added_json.get(range.clone()).unwrap_or_default())
    }

    /// Adds (or replaces in its place) field `name`, whose value `write` writes as JSON.
    fn add(&mut self, name: &'a FieldName, write: impl FnOnce(&mut Vec<u8>)) {
        let earlier = if self.added_names.may_have(name.bit) {
            self.added.iter().position(|(n, _)| n.name == name.name)
        } else {
            None
        };
        let Some(at) = earlier else {
            let start = self.added_json.len();
            write(&mut self.added_json);
            self.added.push((name, start..self.added_json.len()));
            self.added_names.insert_bit(name.bit);
            return;
        };
        // A join replacing a field an earlier one added (rare): the text is rebuilt.
        let mut value = Vec::new();
        write(&mut value);
        let mut json = Vec::with_capacity(self.added_json.len() + value.len());
        for (i, (_, range)) in self.added.iter_mut().enumerate() {
            let start = json.len();
            if i == at {
                json.extend_from_slice(&value);
            } else {
                json.extend_from_slice(self.added_json.get(range.clone()).unwrap_or_default());
            }
            *range = start..json.len();
        }
        self.added_json = json;
    }

    /// Length of [`RawFact::splice_into`]'s output.
    fn spliced_len(&self) -> usize {
        // Each added field: a comma, its quoted name, a colon, its value.
        let names: usize = self.added.iter().map(|(name, _)| name.json.len() + 2).sum();
        self.payload.len() + self.added_json.len() + names
    }

    /// Appends the payload with the added fields written before its closing brace.
    fn splice_into(&self, out: &mut Vec<u8>) {
        let close = self
            .payload
            .iter()
            .rposition(|&b| b == b'}')
            .unwrap_or(self.payload.len());
        let (head, tail) = self.payload.split_at(close);
        out.reserve(self.spliced_len());
        out.extend_from_slice(head);
        for (i, (name, range)) in self.added.iter().enumerate() {
            if i > 0 || !self.fields.is_empty() {
                out.push(b',');
            }
            out.extend_from_slice(&name.json);
            out.push(b':');
            out.extend_from_slice(self.added_json.get(range.clone()).unwrap_or_default());
        }
        out.extend_from_slice(tail);
    }
}

/// The record-key bytes of a raw JSON value when its text already is them (see
/// [`Fact::write_record_key`]): a string without escapes (the text between its quotes), or an
/// integer as `serde_json` writes it (no `-0`, no exponent, and short enough to be an
/// `i64`). `None`: the value has to be parsed.
fn key_text_as_written(raw: &str) -> Option<&[u8]> {
    let bytes = raw.as_bytes();
    if let [b'"', inner @ .., b'"'] = bytes {
        return (!inner.contains(&b'\\')).then_some(inner);
    }
    plain_integer(raw).map(|_| bytes)
}

/// A raw JSON value that is an integer written as `serde_json` writes it (no `-0`, no
/// exponent, no whitespace) and short enough to be an `i64`: its value.
fn plain_integer(raw: &str) -> Option<i64> {
    let bytes = raw.as_bytes();
    let digits = bytes.strip_prefix(b"-").unwrap_or(bytes);
    let plain = match digits {
        [b'0'] => digits.len() == bytes.len(),
        [b'1'..=b'9', rest @ ..] => digits.len() <= 18 && rest.iter().all(u8::is_ascii_digit),
        _ => false,
    };
    if plain { raw.parse().ok() } else { None }
}

/// Writes the JSON of `datum_to_json(datum, ty)` without building the `Value` for the
/// common kinds (a string column is escaped from the datum, not copied first).
fn write_datum_json(out: &mut Vec<u8>, datum: &Datum, ty: &DataType) {
    // Writing into a Vec cannot fail.
    let _ = match datum {
        Datum::Null => {
            out.extend_from_slice(b"null");
            Ok(())
        }
        Datum::String(s) => {
            write_json_str(out, s);
            Ok(())
        }
        Datum::Boolean(b) => serde_json::to_writer(out, b),
        Datum::Int(v) => serde_json::to_writer(out, v),
        Datum::BigInt(v) => serde_json::to_writer(out, v),
        other => serde_json::to_writer(out, &datum_to_json(other, ty)),
    };
}

/// Writes `s` as a JSON string, as `serde_json` does. Most strings (names, and the
/// values of most columns) need no escape: those are found by a scan eight bytes a step
/// ([`plain_run`]) and copied whole, instead of escaping byte by byte.
fn write_json_str(out: &mut Vec<u8>, s: &str) {
    if needs_escape(s.as_bytes()) {
        // Writing a string into a Vec cannot fail.
        let _ = serde_json::to_writer(out, s);
        return;
    }
    write_plain_json_str(out, s.as_bytes());
}

/// Writes bytes that need no escape (and are UTF-8) as a JSON string.
fn write_plain_json_str(out: &mut Vec<u8>, plain: &[u8]) {
    out.reserve(plain.len() + 2);
    out.push(b'"');
    out.extend_from_slice(plain);
    out.push(b'"');
}

/// Whether JSON needs an escape for a byte of `bytes`: a quote, a backslash or a control
/// character (what `serde_json` escapes; other bytes, UTF-8 included, go as they are).
fn needs_escape(bytes: &[u8]) -> bool {
    plain_run(bytes) < bytes.len()
}

#[cfg(test)]
mod tests;
