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
}

impl FieldName {
    pub(crate) fn new(name: impl Into<String>) -> Self {
        let name = name.into();
        let mut json = Vec::with_capacity(name.len() + 2);
        write_json_str(&mut json, &name);
        FieldName {
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
        let fields = RawFields(object_fields(text).or_else(|| serde_fields(text))?);
        Some(Fact::Raw(RawFact {
            payload,
            fields,
            added: Vec::new(),
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
            Fact::Raw(raw) if raw.fields.get(name.as_str()).is_some() => {
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
            Fact::Raw(raw) if raw.fields.get(name.as_str()).is_none() => {
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
            (Fact::Raw(raw), FieldValue::Text(text)) if raw.fields.get(name.as_str()).is_none() => {
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
struct RawFields<'a>(Vec<(&'a str, &'a str)>);

impl<'a> RawFields<'a> {
    /// A field's value as JSON text.
    fn get(&self, name: &str) -> Option<&'a str> {
        self.0
            .iter()
            .rev()
            .find(|(k, _)| *k == name)
            .map(|(_, v)| *v)
    }

    fn is_empty(&self) -> bool {
        self.0.is_empty()
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
        let Some(at) = self.added.iter().position(|(n, _)| n.name == name.name) else {
            let start = self.added_json.len();
            write(&mut self.added_json);
            self.added.push((name, start..self.added_json.len()));
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
mod tests {
    use proptest::prelude::*;
    use serde_json::json;

    use super::*;

    fn both(payload: &str) -> (Fact<'_>, Fact<'_>) {
        let raw = Fact::raw(payload.as_bytes()).expect("a raw fact");
        assert!(matches!(raw, Fact::Raw(_)));
        let tree = Fact::Tree(serde_json::from_str(payload).unwrap());
        (raw, tree)
    }

    fn output(fact: &Fact<'_>) -> Value {
        serde_json::from_slice(&fact.encode(&OutputEncoder::Json).unwrap()).unwrap()
    }

    /// A payload that is not UTF-8 is not kept raw (not even when the bad bytes are in a
    /// value no join reads): the tree parse then refuses it, and the fact is a dead letter
    /// rather than output that is not JSON.
    #[test]
    fn a_payload_that_is_not_utf8_is_not_kept_raw() {
        assert!(Fact::raw(b"{\"id\":1,\"note\":\"\xff\"}").is_none());
        assert!(Fact::raw(br#"{"id":1,"note":"\u00e9"}"#).is_some());
    }

    #[test]
    fn joined_fields_are_spliced_before_the_closing_brace() {
        let payload = r#" {"order_id": 7, "amount": 1.50e1, "customer": {"id": 3}} "#;
        let name = FieldName::new("customer_name");
        let country = FieldName::new("customer_\"country\"");
        let (mut raw, mut tree) = both(payload);
        for fact in [&mut raw, &mut tree] {
            fact.insert(&name, json!("ada \"the\" first")).unwrap();
            fact.insert(&country, Value::Null).unwrap();
        }
        let bytes = raw.encode(&OutputEncoder::Json).unwrap();
        assert_eq!(raw.encoded_len_hint(), bytes.len(), "the exact length");
        assert_eq!(
            String::from_utf8(bytes).unwrap(),
            r#" {"order_id": 7, "amount": 1.50e1, "customer": {"id": 3},"customer_name":"ada \"the\" first","customer_\"country\"":null} "#
        );
        assert_eq!(output(&raw), output(&tree));
        assert_eq!(raw.get("customer.id").unwrap().as_deref(), Some(&json!(3)));
        assert_eq!(
            raw.get("customer_name").unwrap().as_deref(),
            Some(&json!("ada \"the\" first"))
        );
    }

    #[test]
    fn a_datum_is_added_as_its_json_and_a_replaced_field_keeps_its_place() {
        use crate::table::datum::Timestamp;
        let columns = [
            (Datum::String("ada \"é\"".into()), DataType::Varchar(20)),
            (Datum::Null, DataType::Int),
            (Datum::BigInt(-7), DataType::BigInt),
            (Datum::Boolean(true), DataType::Boolean),
            (
                Datum::Decimal(1230),
                DataType::Decimal {
                    precision: 6,
                    scale: 2,
                },
            ),
            (Datum::Double(0.5), DataType::Double),
            (
                Datum::Timestamp(Timestamp {
                    millis: 1_700_000_000_123,
                    nanos_of_milli: 0,
                }),
                DataType::Timestamp(3),
            ),
        ];
        let names: Vec<FieldName> = (0..columns.len())
            .map(|i| FieldName::new(format!("c{i}")))
            .collect();
        let c1 = FieldName::new("c1");
        let (mut raw, mut tree) = both(r#"{"id": 1}"#);
        for (name, (datum, ty)) in names.iter().zip(&columns) {
            raw.insert_datum(name, datum, ty).unwrap();
            tree.insert(name, datum_to_json(datum, ty)).unwrap();
        }
        assert!(matches!(raw, Fact::Raw(_)));
        assert_eq!(output(&raw), output(&tree));
        assert_eq!(raw.get("c2").unwrap().as_deref(), Some(&json!(-7)));
        // An earlier join's field replaced by a later one keeps its place.
        raw.insert_datum(&c1, &Datum::Int(9), &DataType::Int)
            .unwrap();
        tree.insert(&c1, json!(9)).unwrap();
        assert_eq!(output(&raw), output(&tree));
        let order = |v: Value| v.as_object().map(|m| m.keys().cloned().collect::<Vec<_>>());
        assert_eq!(order(output(&raw)), order(output(&tree)));
        assert_eq!(raw.get("c1").unwrap().as_deref(), Some(&json!(9)));
    }

    /// A string read from a stored row is checked to be UTF-8 where it is written out,
    /// in a raw fact and in a tree alike; a plain ASCII one and one that needs an escape
    /// or is not ASCII are written as `serde_json` writes them.
    #[test]
    fn stored_text_is_checked_where_it_is_written() {
        let name = FieldName::new("joined");
        for (mut fact, form) in [both(r#"{"id": 1}"#).0, both(r#"{"id": 1}"#).1]
            .into_iter()
            .zip(["raw", "tree"])
        {
            let err = fact
                .insert_field(&name, FieldValue::Text(b"caf\xe9"), &DataType::Varchar(9))
                .unwrap_err();
            assert!(
                matches!(&err, FactValueError::StoredText { path, .. } if path == "joined"),
                "{form}: {err}"
            );
        }
        for text in ["plain", "caf\u{e9}", "a \"quote\"", ""] {
            let (mut raw, _) = both(r#"{"id": 1}"#);
            raw.insert_field(
                &name,
                FieldValue::Text(text.as_bytes()),
                &DataType::Varchar(9),
            )
            .unwrap();
            assert_eq!(output(&raw), json!({"id": 1, "joined": text}), "{text:?}");
        }
    }

    #[test]
    fn an_empty_object_gets_no_leading_comma() {
        let a = FieldName::new("a");
        let (mut raw, _) = both("{ }");
        raw.insert(&a, json!(1)).unwrap();
        assert_eq!(
            raw.encode(&OutputEncoder::Json).unwrap(),
            br#"{ "a":1}"#.to_vec()
        );
    }

    #[test]
    fn replacing_a_field_of_the_payload_turns_the_fact_into_a_tree() {
        let a = FieldName::new("a");
        let (mut raw, mut tree) = both(r#"{"a": 1, "b": 2}"#);
        raw.insert(&a, json!("x")).unwrap();
        tree.insert(&a, json!("x")).unwrap();
        assert!(matches!(raw, Fact::Tree(_)));
        assert_eq!(output(&raw), json!({"a": "x", "b": 2}));
        assert_eq!(output(&raw), output(&tree));
    }

    #[test]
    fn a_number_out_of_range_is_an_error_where_a_tree_is_needed_never_an_empty_object() {
        let payload = br#"{"big": 1e400, "k": 1}"#;
        let x = FieldName::new("x");
        let mut raw = Fact::raw(payload).expect("valid JSON stays raw");
        let err = raw.get("big").unwrap_err();
        assert!(
            matches!(&err, FactValueError::Field { path, .. } if path == "big"),
            "{err}"
        );
        assert!(std::error::Error::source(&err).is_some(), "{err:?}");
        // Spliced output keeps the number as written.
        let mut spliced = raw.clone();
        spliced.insert(&x, json!(2)).unwrap();
        assert_eq!(
            spliced.encode(&OutputEncoder::Json).unwrap(),
            br#"{"big": 1e400, "k": 1,"x":2}"#.to_vec()
        );
        // Replacing a field needs the tree: an error, not a silently emptied fact.
        let k = FieldName::new("k");
        let err = raw.insert(&k, json!(2)).unwrap_err();
        assert!(matches!(err, FactValueError::Payload(_)), "{err}");
    }

    #[test]
    fn payloads_that_are_not_plain_objects_are_not_raw() {
        for payload in [r#"[1]"#, "7", "{not json", r#"{"a\"b": 1}"#, ""] {
            assert!(Fact::raw(payload.as_bytes()).is_none(), "{payload}");
        }
    }

    fn scalar() -> impl Strategy<Value = Value> {
        prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i64>().prop_map(|n| json!(n)),
            (-1e6f64..1e6).prop_map(|f| json!(f)),
            "[a-z é\"\\\\]{0,8}".prop_map(Value::String),
        ]
    }

    fn value() -> impl Strategy<Value = Value> {
        scalar().prop_recursive(2, 8, 3, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..3).prop_map(Value::Array),
                prop::collection::btree_map("[a-c]{1,2}", inner, 0..3)
                    .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }

    /// A record key read from the payload's text is the key the parsed value gives,
    /// for numbers and strings written in every way JSON allows.
    #[test]
    fn record_keys_read_in_place_are_those_of_the_parsed_value() {
        for value in [
            "0",
            "-0",
            "7",
            "-7",
            "1e2",
            "1E2",
            "1.50",
            "-0.0",
            "123456789012345678",
            "1234567890123456789",
            "12345678901234567890",
            "123456789012345678901",
            "-9223372036854775808",
            "-999999999999999999",
            "-9999999999999999999",
            " \t 42 \n",
            r#""""#,
            r#""ab""#,
            r#""é""#,
            r#""a\"b""#,
            r#""\u00e9""#,
            "true",
            "null",
            "[1]",
            r#"{"a":1}"#,
        ] {
            let payload = format!(r#"{{"k": {value}, "o": 1}}"#);
            let (raw, tree) = both(&payload);
            // Integers are read without the JSON parser, to the same value.
            assert_eq!(raw.get("k").unwrap(), tree.get("k").unwrap(), "{value}");
            assert_eq!(
                raw.record_key("k").unwrap(),
                tree.record_key("k").unwrap(),
                "{value}"
            );
        }
        // A repeated key reads as its last value.
        let (raw, tree) = both(r#"{"k": "first", "k": 12}"#);
        assert_eq!(raw.record_key("k").unwrap(), Some(b"12".to_vec()));
        assert_eq!(tree.record_key("k").unwrap(), Some(b"12".to_vec()));
        let (raw, _) = both(r#"{"k": 1}"#);
        assert_eq!(raw.record_key("missing").unwrap(), None);
    }

    /// Every byte JSON escapes is found in every lane of a word and in the remainder;
    /// its neighbours in value, and UTF-8, are not.
    #[test]
    fn escapes_are_found_at_every_position() {
        for position in 0..20 {
            for (byte, escaped) in [
                (0x00, true),
                (0x1f, true),
                (b'"', true),
                (b'\\', true),
                (0x20, false),
                (b'!', false),
                (b'#', false),
                (b'[', false),
                (b']', false),
                (0x7f, false),
                (0xc3, false),
            ] {
                let mut bytes = vec![b'a'; 20];
                bytes[position] = byte;
                assert_eq!(needs_escape(&bytes), escaped, "{byte:#x} at {position}");
            }
        }
    }

    proptest! {
        /// Whatever the payload and the joined fields, both forms read the same values
        /// and write the same object.
        #[test]
        fn raw_and_tree_facts_agree(
            fields in prop::collection::vec(("[a-d]{1,2}", value()), 0..6),
            inserts in prop::collection::vec(("[a-f]{1,2}", scalar()), 0..6),
            spaced in any::<bool>(),
        ) {
            let object: Map<String, Value> = fields.into_iter().collect();
            let payload = if spaced {
                serde_json::to_string_pretty(&object).unwrap()
            } else {
                serde_json::to_string(&object).unwrap()
            };
            let names: Vec<FieldName> = inserts.iter().map(|(name, _)| FieldName::new(name.as_str())).collect();
            let (mut raw, mut tree) = both(&payload);
            for (name, (_, value)) in names.iter().zip(&inserts) {
                raw.insert(name, value.clone()).unwrap();
                tree.insert(name, value.clone()).unwrap();
                for path in ["a", "b", "c.a", "a.b", "e", "a.0", "f"] {
                    prop_assert_eq!(raw.get(path).unwrap(), tree.get(path).unwrap(), "path {}", path);
                }
            }
            for path in ["a", "b", "c", "d", "e", "a.b"] {
                prop_assert_eq!(raw.record_key(path).unwrap(), tree.record_key(path).unwrap(), "path {}", path);
            }
            prop_assert_eq!(output(&raw), output(&tree));
            let order = |v: Value| v.as_object().map(|m| m.keys().cloned().collect::<Vec<_>>());
            prop_assert_eq!(order(output(&raw)), order(output(&tree)));
        }

        /// The fast string writer writes exactly what `serde_json` writes, whatever the
        /// string (quotes, backslashes and control characters at any place in a chunk).
        #[test]
        fn strings_are_written_as_serde_json_writes_them(
            s in "(\\PC|[\"\\\\\u{0}-\u{1f}\u{7f}é€😀]){0,70}",
        ) {
            let mut ours = b"x".to_vec();
            write_json_str(&mut ours, &s);
            prop_assert_eq!(ours, [b"x".as_slice(), serde_json::to_string(&s).unwrap().as_bytes()].concat());
        }

        /// A column read in place from a looked-up row is written as its datum is, into
        /// raw and tree facts alike, also when it replaces one of the fact's own fields.
        #[test]
        fn fields_read_in_place_are_written_as_their_datums(
            text in "(\\PC|[\"\\\\\u{0}-\u{1f}])*",
            number in any::<i64>(),
            replace in any::<bool>(),
        ) {
            let name = FieldName::new(if replace { "id" } else { "joined" });
            let name = &name;
            let cases = [
                (FieldValue::Text(text.as_bytes()), Datum::String(text.clone()), DataType::Varchar(100)),
                (FieldValue::Null, Datum::Null, DataType::Varchar(100)),
                (FieldValue::Datum(Datum::BigInt(number)), Datum::BigInt(number), DataType::BigInt),
            ];
            for (field, datum, ty) in cases {
                let (mut raw, mut tree) = both(r#"{"id": 1}"#);
                let (mut raw_datum, mut tree_datum) = both(r#"{"id": 1}"#);
                raw.insert_field(name, field.clone(), &ty).unwrap();
                tree.insert_field(name, field, &ty).unwrap();
                raw_datum.insert_datum(name, &datum, &ty).unwrap();
                tree_datum.insert_datum(name, &datum, &ty).unwrap();
                let want = raw_datum.encode(&OutputEncoder::Json).unwrap();
                prop_assert_eq!(&raw.encode(&OutputEncoder::Json).unwrap(), &want);
                prop_assert_eq!(output(&tree), output(&tree_datum));
                prop_assert_eq!(output(&tree), serde_json::from_slice::<Value>(&want).unwrap());
            }
        }
    }
}
