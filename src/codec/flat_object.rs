//! A JSON object read straight into one value slot per column, for rows whose columns
//! are all top-level fields (no dotted paths).
//!
//! Why: parsing a record into a `serde_json::Map` builds an index map of owned keys
//! (hashed with SipHash) only for the row builder to look each column up in it again;
//! that was about a third of a CDC pipeline's decoding. Here each key is looked up once,
//! borrowed from the payload, in a map of the table's field names, and fields that are
//! not columns are skipped without being built. A payload this cannot read (not JSON,
//! not an object) returns `None`, and the caller parses it the general way, which also
//! words the error; so both paths accept the same records and give the same rows.
//!
//! A JSON string is kept as a [`CompactString`] read from the payload (`FieldValue::Text`),
//! not as a `Value::String`: a short one then costs no heap block at all, and a string
//! column's datum takes it as it is.

use std::borrow::Cow;
use std::collections::{HashMap, HashSet};
use std::fmt;

use compact_str::CompactString;
use serde::de::value::{MapAccessDeserializer, SeqAccessDeserializer};
use serde::de::{self, DeserializeSeed, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::Value;

/// Column slot of each top-level field name a row reads.
#[derive(Debug)]
pub(crate) struct FieldSlots {
    slots: HashMap<Box<str>, usize, foldhash::fast::RandomState>,
    /// Number of slots (the table's columns; metadata columns keep theirs empty).
    columns: usize,
    /// Fields read by something else than a column (a row-kind field): not unknown.
    other_consumed: HashSet<String>,
    /// Report fields that are neither.
    strict: bool,
}

/// The fields of one object, by column slot, and (in strict mode) the names of the fields
/// that are not columns, in order of first appearance.
#[derive(Debug)]
pub(crate) struct ParsedFields {
    pub(crate) values: Vec<Option<FieldValue>>,
    pub(crate) unknown: Vec<String>,
}

/// One field's value.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum FieldValue {
    /// A JSON string.
    Text(CompactString),
    /// Any other JSON value.
    Json(Value),
}

impl FieldValue {
    /// The value as JSON, for coercion to a column type other than a string's and for
    /// error messages.
    pub(crate) fn into_json(self) -> Value {
        match self {
            FieldValue::Text(s) => Value::String(s.into_string()),
            FieldValue::Json(v) => v,
        }
    }
}

impl FieldSlots {
    /// `fields`: (field name, column slot) for every column read from a top-level field.
    /// `None` when two columns read one field (the general path handles that).
    pub(crate) fn new<'a>(
        fields: impl IntoIterator<Item = (&'a str, usize)>,
        columns: usize,
        other_consumed: HashSet<String>,
        strict: bool,
    ) -> Option<Self> {
        let mut slots = HashMap::with_hasher(foldhash::fast::RandomState::default());
        for (name, slot) in fields {
            if slots.insert(Box::<str>::from(name), slot).is_some() {
                return None;
            }
        }
        Some(FieldSlots {
            slots,
            columns,
            other_consumed,
            strict,
        })
    }

    /// Reads `bytes` as one JSON object; `None` when it is not one.
    pub(crate) fn parse(&self, bytes: &[u8]) -> Option<ParsedFields> {
        // UTF-8 checked once for the whole payload, not once per string.
        let mut de = serde_json::Deserializer::from_str(std::str::from_utf8(bytes).ok()?);
        let fields = ObjectSeed(self).deserialize(&mut de).ok()?;
        de.end().ok()?;
        Some(fields)
    }

    /// Sets field `name` (a later value of a field replaces an earlier one, as in a map).
    pub(crate) fn set(&self, fields: &mut ParsedFields, name: &str, value: Value) {
        match self.slots.get(name) {
            Some(&slot) => {
                if let Some(v) = fields.values.get_mut(slot) {
                    *v = Some(match value {
                        Value::String(s) => FieldValue::Text(s.into()),
                        other => FieldValue::Json(other),
                    });
                }
            }
            None => self.not_a_column(fields, name),
        }
    }

    fn not_a_column(&self, fields: &mut ParsedFields, name: &str) {
        if self.strict
            && !self.other_consumed.contains(name)
            && !fields.unknown.iter().any(|u| u == name)
        {
            fields.unknown.push(name.to_string());
        }
    }
}

struct ObjectSeed<'a>(&'a FieldSlots);

impl<'de> DeserializeSeed<'de> for ObjectSeed<'_> {
    type Value = ParsedFields;

    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<ParsedFields, D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for ObjectSeed<'_> {
    type Value = ParsedFields;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<ParsedFields, A::Error> {
        let slots = self.0;
        let mut fields = ParsedFields {
            values: vec![None; slots.columns],
            unknown: Vec::new(),
        };
        while let Some(Key(name)) = map.next_key::<Key<'de>>()? {
            match slots.slots.get(name.as_ref()) {
                Some(&slot) => {
                    let value = map.next_value_seed(FieldValueSeed)?;
                    if let Some(v) = fields.values.get_mut(slot) {
                        *v = Some(value);
                    }
                }
                None => {
                    map.next_value::<IgnoredAny>()?;
                    slots.not_a_column(&mut fields, &name);
                }
            }
        }
        Ok(fields)
    }
}

/// Reads a [`FieldValue`]: a string as text, anything else as serde_json reads it.
struct FieldValueSeed;

impl<'de> DeserializeSeed<'de> for FieldValueSeed {
    type Value = FieldValue;

    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<FieldValue, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for FieldValueSeed {
    type Value = FieldValue;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<FieldValue, E> {
        Ok(FieldValue::Text(CompactString::from(v)))
    }

    fn visit_string<E: de::Error>(self, v: String) -> Result<FieldValue, E> {
        Ok(FieldValue::Text(v.into()))
    }

    fn visit_bool<E: de::Error>(self, v: bool) -> Result<FieldValue, E> {
        Ok(FieldValue::Json(Value::Bool(v)))
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<FieldValue, E> {
        Ok(FieldValue::Json(Value::from(v)))
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<FieldValue, E> {
        Ok(FieldValue::Json(Value::from(v)))
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<FieldValue, E> {
        // As serde_json's own `Value` reads it (a non-finite float is null).
        Ok(FieldValue::Json(Value::from(v)))
    }

    fn visit_unit<E: de::Error>(self) -> Result<FieldValue, E> {
        Ok(FieldValue::Json(Value::Null))
    }

    fn visit_none<E: de::Error>(self) -> Result<FieldValue, E> {
        Ok(FieldValue::Json(Value::Null))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<FieldValue, A::Error> {
        de::Deserialize::deserialize(SeqAccessDeserializer::new(seq)).map(FieldValue::Json)
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<FieldValue, A::Error> {
        de::Deserialize::deserialize(MapAccessDeserializer::new(map)).map(FieldValue::Json)
    }
}

/// An object key, borrowed from the payload unless it has escapes.
struct Key<'de>(Cow<'de, str>);

impl<'de> de::Deserialize<'de> for Key<'de> {
    fn deserialize<D: de::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct KeyVisitor;
        impl<'de> Visitor<'de> for KeyVisitor {
            type Value = Key<'de>;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a field name")
            }

            fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Key<'de>, E> {
                Ok(Key(Cow::Borrowed(v)))
            }

            fn visit_str<E: de::Error>(self, v: &str) -> Result<Key<'de>, E> {
                Ok(Key(Cow::Owned(v.to_string())))
            }

            fn visit_string<E: de::Error>(self, v: String) -> Result<Key<'de>, E> {
                Ok(Key(Cow::Owned(v)))
            }
        }
        d.deserialize_str(KeyVisitor)
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;
    use serde_json::{Map, json};

    use super::*;

    fn slots(strict: bool) -> FieldSlots {
        FieldSlots::new(
            [("id", 0), ("name", 1), ("price", 3)],
            4,
            HashSet::from(["op".to_string()]),
            strict,
        )
        .unwrap()
    }

    #[test]
    fn fields_land_in_their_slots_and_the_last_value_wins() {
        let got = slots(true)
            .parse(br#"{"name":"a\"b","id":7,"extra":{"x":[1,2]},"op":"c","id":8,"z":1,"extra":2}"#)
            .unwrap();
        assert_eq!(
            got.values,
            vec![
                Some(FieldValue::Json(json!(8))),
                Some(FieldValue::Text("a\"b".into())),
                None,
                None
            ]
        );
        assert_eq!(got.unknown, vec!["extra".to_string(), "z".to_string()]);
        assert!(
            slots(false)
                .parse(br#"{"extra":1}"#)
                .unwrap()
                .unknown
                .is_empty()
        );
    }

    #[test]
    fn escaped_keys_match_and_non_objects_are_refused() {
        let got = slots(false).parse(br#"{"n\u0061me":"x"}"#).unwrap();
        assert_eq!(got.values[1], Some(FieldValue::Text("x".into())));
        for bad in [
            &b"[1]"[..],
            b"\"s\"",
            b"{\"id\":1",
            b"{\"id\":1} x",
            b"",
            b"\xff",
            // Not UTF-8 in a field that is not a column: refused like the rest of the
            // text, as the general path's parse refuses it.
            b"{\"id\":1,\"skipped\":\"\xff\"}",
        ] {
            assert!(slots(false).parse(bad).is_none(), "{bad:?}");
        }
    }

    #[test]
    fn two_columns_of_one_field_are_left_to_the_general_path() {
        assert!(FieldSlots::new([("a", 0), ("a", 1)], 2, HashSet::new(), false).is_none());
    }

    proptest! {
        /// Whatever object it is given, the slots hold what a `Map` parse gives for the
        /// same names (and it refuses exactly what is not an object).
        #[test]
        fn agrees_with_a_map_parse(
            entries in proptest::collection::vec(
                (prop_oneof![Just("id".to_string()), Just("name".to_string()), Just("price".to_string()), Just("op".to_string()), "[a-z]{1,3}"],
                 prop_oneof![
                    any::<i64>().prop_map(Value::from),
                    any::<f64>().prop_filter("finite", |f| f.is_finite()).prop_map(Value::from),
                    ".{0,8}".prop_map(Value::from),
                    Just(Value::Null),
                    Just(json!({"a": [1, "b"]})),
                    Just(json!([true, {"b": null}, -1.5])),
                    any::<u64>().prop_map(Value::from),
                    any::<bool>().prop_map(Value::from),
                 ]),
                0..8),
        ) {
            let mut text = String::from("{");
            for (i, (k, v)) in entries.iter().enumerate() {
                if i > 0 {
                    text.push(',');
                }
                text.push_str(&format!("{}:{v}", Value::from(k.as_str())));
            }
            text.push('}');
            let map: Map<String, Value> = serde_json::from_str(&text).unwrap();
            let got = slots(true).parse(text.as_bytes()).unwrap();
            for (name, slot) in [("id", 0), ("name", 1), ("price", 3)] {
                let value = got.values[slot].clone().map(FieldValue::into_json);
                prop_assert_eq!(value.as_ref(), map.get(name));
            }
            prop_assert_eq!(got.values[2].as_ref(), None);
            let unknown: Vec<&String> = map
                .keys()
                .filter(|k| !["id", "name", "price", "op"].contains(&k.as_str()))
                .collect();
            prop_assert_eq!(got.unknown.iter().collect::<Vec<_>>(), unknown);
        }
    }
}
