//! Tests of the binary encoding shared by every Avro reader and writer: varints, lengths,
//! collections and their bounds, and properties over arbitrary values and bytes.

use proptest::prelude::*;

use super::*;

fn long_of(bytes: &[u8]) -> Result<i64> {
    Cursor::new(bytes).long()
}

#[test]
fn varints_round_trip() {
    for v in [
        0,
        1,
        -1,
        63,
        -64,
        64,
        300,
        i32::MAX as i64,
        i64::MAX,
        i64::MIN,
    ] {
        let mut buf = Vec::new();
        put_long(&mut buf, v);
        let mut cur = Cursor::new(&buf);
        assert_eq!(cur.long().unwrap(), v);
        assert!(cur.at_end());
    }
    // Avro spec examples.
    let mut buf = Vec::new();
    put_long(&mut buf, -64);
    assert_eq!(buf, [0x7f]);
    buf.clear();
    put_long(&mut buf, 64);
    assert_eq!(buf, [0x80, 0x01]);
}

#[test]
fn overlong_and_truncated_varints_are_errors() {
    let err = long_of(&[0xff; 11]).unwrap_err().to_string();
    assert!(err.contains("overflows 64 bits"), "{err}");
    let err = long_of(&[0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02])
        .unwrap_err()
        .to_string();
    assert!(err.contains("varint at offset 0 overflows"), "{err}");
    let err = long_of(&[0x80, 0x80]).unwrap_err().to_string();
    assert!(err.contains("needs 1 bytes at offset 2, 0 left"), "{err}");
    assert!(Cursor::new(&[0xFF, 0xFF, 0xFF, 0xFF, 0x7F]).int().is_err());
}

#[test]
fn lengths_indexes_and_booleans_are_checked() {
    let mut huge = Vec::new();
    put_long(&mut huge, 1 << 62);
    let err = Cursor::new(&huge).bytes().unwrap_err().to_string();
    assert!(err.contains("exceeds the 0 bytes left"), "{err}");
    let mut negative = Vec::new();
    put_long(&mut negative, -3);
    assert!(Cursor::new(&negative).bytes().is_err());
    let err = Cursor::new(&[4]).index(2, "union").unwrap_err().to_string();
    assert!(err.contains("union index 2 out of range 0..2"), "{err}");
    assert!(Cursor::new(&[2]).boolean().is_err());
    let err = Cursor::new(&[2, 0xFF])
        .str("map key")
        .unwrap_err()
        .to_string();
    assert!(err.contains("map key at offset 0 is not UTF-8"), "{err}");
}

#[test]
fn huge_counts_are_rejected_without_allocating() {
    let longs: Node = Node::Array {
        items: Box::new(Node::Long),
        item_min: 1,
    };
    for count in [i64::MAX, i64::MIN, 1 << 40] {
        let mut buf = Vec::new();
        put_long(&mut buf, count);
        assert!(read(&longs, &mut Cursor::new(&buf)).is_err(), "{count}");
    }
    let nulls: Node = Node::Array {
        items: Box::new(Node::Null),
        item_min: 0,
    };
    let mut buf = Vec::new();
    put_long(&mut buf, 1 << 40);
    let err = read(&nulls, &mut Cursor::new(&buf))
        .unwrap_err()
        .to_string();
    assert!(err.contains("zero-byte"), "{err}");
    // The budget is per datum: the next datum starts afresh (that arrays in one datum
    // share it is `codec::avro`'s hostile_bytes test).
    let mut two = Vec::new();
    for _ in 0..2 {
        put_long(&mut two, MAX_ZERO_SIZE_ITEMS as i64);
        two.push(0);
    }
    let mut cur = Cursor::new(&two);
    for _ in 0..2 {
        let Val::Array(items) = read(&nulls, &mut cur).unwrap() else {
            panic!("an array")
        };
        assert_eq!(items.len(), MAX_ZERO_SIZE_ITEMS);
    }
    // A negative count is followed by the block's size.
    let mut negative = Vec::new();
    put_long(&mut negative, -2);
    put_long(&mut negative, 0);
    negative.push(0);
    assert_eq!(
        read(&nulls, &mut Cursor::new(&negative)).unwrap(),
        Val::Array(vec![Val::Null, Val::Null])
    );
}

#[test]
fn collections_are_written_as_one_block() {
    let mut buf = Vec::new();
    put_strings(&mut buf, &["a".to_string(), "bc".to_string()]);
    assert_eq!(buf, [4, 2, b'a', 4, b'b', b'c', 0]);
    buf.clear();
    put_strings(&mut buf, &[]);
    assert_eq!(buf, [0]);
    let refused: std::result::Result<(), &str> =
        put_collection(&mut buf, [1, 2].iter(), |_, _| Err("no"));
    assert_eq!(refused, Err("no"));
}

/// The schema of the property tests: a record of every primitive, a nullable array of
/// records, a map and an enum.
const SAMPLE_SCHEMA: &str = r#"{"type": "record", "name": "r", "fields": [
    {"name": "b", "type": "boolean"}, {"name": "i", "type": "int"},
    {"name": "l", "type": "long"}, {"name": "f", "type": "float"},
    {"name": "d", "type": "double"}, {"name": "s", "type": "string"},
    {"name": "x", "type": {"type": "fixed", "name": "X", "size": 2}},
    {"name": "a", "type": ["null", {"type": "array", "items": {"type": "record",
        "name": "item", "fields": [{"name": "n", "type": "null"},
        {"name": "v", "type": "long"}]}}]},
    {"name": "m", "type": {"type": "map", "values": "bytes"}},
    {"name": "e", "type": {"type": "enum", "name": "E", "symbols": ["A", "B", "C"]}}
]}"#;

type Sample = (
    bool,
    i32,
    i64,
    f32,
    f64,
    String,
    [u8; 2],
    Option<Vec<i64>>,
    Vec<(String, Vec<u8>)>,
    u8,
);

fn put_sample(out: &mut Vec<u8>, s: &Sample) {
    out.push(u8::from(s.0));
    put_long(out, s.1.into());
    put_long(out, s.2);
    out.extend_from_slice(&s.3.to_le_bytes());
    out.extend_from_slice(&s.4.to_le_bytes());
    put_bytes(out, s.5.as_bytes());
    out.extend_from_slice(&s.6);
    match &s.7 {
        None => put_long(out, 0),
        Some(items) => {
            put_long(out, 1);
            put_collection(out, items.iter(), |out, v| {
                put_long(out, *v);
                Ok::<(), ()>(())
            })
            .unwrap();
        }
    }
    put_collection(out, s.8.iter(), |out, (k, v)| {
        put_bytes(out, k.as_bytes());
        put_bytes(out, v);
        Ok::<(), ()>(())
    })
    .unwrap();
    put_long(out, i64::from(s.9 % 3));
}

fn expected(s: &Sample) -> Val<'_> {
    Val::Record(vec![
        Val::Bool(s.0),
        Val::Long(s.1.into()),
        Val::Long(s.2),
        Val::Float(s.3),
        Val::Double(s.4),
        Val::Bytes(s.5.as_bytes()),
        Val::Bytes(&s.6),
        match &s.7 {
            None => Val::Null,
            Some(items) => Val::Array(
                items
                    .iter()
                    .map(|v| Val::Record(vec![Val::Null, Val::Long(*v)]))
                    .collect(),
            ),
        },
        Val::Map(
            s.8.iter()
                .map(|(k, v)| (k.as_bytes(), Val::Bytes(v)))
                .collect(),
        ),
        Val::Long(i64::from(s.9 % 3)),
    ])
}

fn sample() -> impl Strategy<Value = Sample> {
    (
        any::<bool>(),
        any::<i32>(),
        any::<i64>(),
        any::<i32>().prop_map(|i| i as f32),
        any::<i64>().prop_map(|i| i as f64),
        ".{0,8}",
        any::<[u8; 2]>(),
        proptest::option::of(proptest::collection::vec(any::<i64>(), 0..5)),
        proptest::collection::vec(
            (".{0,4}", proptest::collection::vec(any::<u8>(), 0..4)),
            0..4,
        ),
        any::<u8>(),
    )
}

proptest! {
    #[test]
    fn every_long_round_trips(v in any::<i64>()) {
        let mut buf = Vec::new();
        put_long(&mut buf, v);
        prop_assert!(buf.len() <= 10);
        let mut cur = Cursor::new(&buf);
        prop_assert_eq!(cur.long().unwrap(), v);
        prop_assert!(cur.at_end());
    }

    #[test]
    fn every_byte_string_round_trips(bytes in proptest::collection::vec(any::<u8>(), 0..300)) {
        let mut buf = Vec::new();
        put_bytes(&mut buf, &bytes);
        let mut cur = Cursor::new(&buf);
        prop_assert_eq!(cur.bytes().unwrap(), &bytes[..]);
        prop_assert!(cur.at_end());
    }

    /// Any bytes read as any primitive either fail or advance within the input.
    #[test]
    fn reads_stay_inside_the_input(bytes in proptest::collection::vec(any::<u8>(), 0..64)) {
        for step in 0..6 {
            let mut cur = Cursor::new(&bytes);
            while !cur.at_end() {
                let before = cur.position();
                let ok = match step {
                    0 => cur.long().is_ok(),
                    1 => cur.int().is_ok(),
                    2 => cur.bytes().is_ok(),
                    3 => cur.str("string").is_ok(),
                    4 => cur.boolean().is_ok(),
                    _ => cur.collection(1, |c| c.long().map(drop)).is_ok(),
                };
                prop_assert!(cur.position() <= bytes.len());
                if !ok {
                    break;
                }
                prop_assert!(cur.position() > before);
            }
        }
    }

    #[test]
    fn records_round_trip(values in proptest::collection::vec(sample(), 1..8)) {
        let schema: Node = parse(SAMPLE_SCHEMA.as_bytes()).unwrap();
        let mut buf = Vec::new();
        for v in &values {
            put_sample(&mut buf, v);
        }
        let mut cur = Cursor::new(&buf);
        for v in &values {
            prop_assert_eq!(read(&schema, &mut cur).unwrap(), expected(v));
        }
        prop_assert!(cur.at_end());
        // Every cut of the input fails cleanly or reads a prefix of the records.
        for cut in 0..buf.len() {
            let mut cur = Cursor::new(&buf[..cut]);
            while read(&schema, &mut cur).is_ok() {}
        }
    }

    /// The container files of every codec read back as written, and any corruption of
    /// them is an error or a file, never a panic.
    #[test]
    fn container_files_round_trip(
        values in proptest::collection::vec(sample(), 0..20),
        codec in prop_oneof![
            Just(BlockCodec::Null), Just(BlockCodec::Deflate),
            Just(BlockCodec::Snappy), Just(BlockCodec::Zstandard),
        ],
        flip in any::<(usize, u8)>(),
    ) {
        let mut w = ContainerWriter::new(SAMPLE_SCHEMA, codec);
        for v in &values {
            w.append(|out| put_sample(out, v)).unwrap();
        }
        let bytes = w.finish().unwrap();
        let file = read_container(&bytes, 1 << 20).unwrap();
        prop_assert_eq!(file.codec, codec);
        let owned = |v: Val<'_>| -> Result<String> { Ok(format!("{v:?}")) };
        let read_back = file.records(owned).unwrap();
        let want: Vec<String> = values.iter().map(|v| format!("{:?}", expected(v))).collect();
        prop_assert_eq!(read_back, want);
        let mut bad = bytes.clone();
        let at = flip.0 % bad.len();
        bad[at] ^= flip.1.max(1);
        if let Ok(file) = read_container(&bad, 1 << 20) {
            let _ = file.records(owned);
        }
    }
}
