//! Tests of `codec::fact`: raw and tree facts read and write the same JSON, joined
//! columns are spliced as written, and proptests over random payloads and joins.

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
    /// A name set never forgets a name: the bit of every name put in is set, so a
    /// clear bit proves a name absent.
    #[test]
    fn a_name_set_has_every_name_put_in_it(names in prop::collection::vec(".{0,20}", 0..12)) {
        let mut set = NameSet::default();
        for name in &names {
            set.insert_bit(NameSet::bit(name));
        }
        for name in &names {
            prop_assert!(set.may_have(NameSet::bit(name)), "{name:?}");
        }
    }

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
            (FieldValue::Text(text.as_bytes()), Datum::String(text.clone().into()), DataType::Varchar(100)),
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
