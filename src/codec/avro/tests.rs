//! Tests of the codec's Avro mapping: every type and logical type against apache-avro,
//! lenient encoding and its errors, schema errors, hostile bytes, Confluent frames and
//! Debezium's Connect hints.

use apache_avro::Schema;
use apache_avro::reader::datum::GenericDatumReader;
use apache_avro::types::Value as AV;
use apache_avro::writer::datum::GenericDatumWriter;
use serde_json::json;

use super::*;
use crate::avro::put_long;
use crate::codec::coerce::Semantic;

/// A schema with every type and logical type.
fn all_types() -> Value {
    json!({
        "type": "record", "name": "All", "namespace": "t",
        "fields": [
            {"name": "n", "type": "null"},
            {"name": "b", "type": "boolean"},
            {"name": "i", "type": "int"},
            {"name": "l", "type": "long"},
            {"name": "f", "type": "float"},
            {"name": "d", "type": "double"},
            {"name": "by", "type": "bytes"},
            {"name": "s", "type": "string"},
            {"name": "fx", "type": {"type": "fixed", "name": "F3", "size": 3}},
            {"name": "e", "type": {"type": "enum", "name": "Colour",
                                   "symbols": ["RED", "GREEN"]}},
            {"name": "a", "type": {"type": "array", "items": "long"}},
            {"name": "m", "type": {"type": "map", "values": ["null", "string"]}},
            {"name": "u", "type": ["null", "long", "string"]},
            {"name": "r", "type": {"type": "record", "name": "Inner",
                                   "fields": [{"name": "x", "type": "int"}]}},
            {"name": "r2", "type": "Inner"},
            {"name": "date", "type": {"type": "int", "logicalType": "date"}},
            {"name": "tms", "type": {"type": "int", "logicalType": "time-millis"}},
            {"name": "tus", "type": {"type": "long", "logicalType": "time-micros"}},
            {"name": "tsm", "type": {"type": "long", "logicalType": "timestamp-millis"}},
            {"name": "tsu", "type": {"type": "long", "logicalType": "timestamp-micros"}},
            {"name": "tsn", "type": {"type": "long", "logicalType": "timestamp-nanos"}},
            {"name": "lts", "type": {"type": "long",
                                     "logicalType": "local-timestamp-micros"}},
            {"name": "dec", "type": {"type": "bytes", "logicalType": "decimal",
                                     "precision": 10, "scale": 2}},
            {"name": "decf", "type": {"type": "fixed", "name": "D8", "size": 8,
                                      "logicalType": "decimal", "precision": 12,
                                      "scale": 3}},
            {"name": "uu", "type": {"type": "string", "logicalType": "uuid"}},
            {"name": "dur", "type": {"type": "fixed", "name": "Dur", "size": 12,
                                     "logicalType": "duration"}}
        ]
    })
}

fn sample() -> Value {
    json!({
        "n": null, "b": true, "i": -7, "l": 1_i64 << 40, "f": 1.5, "d": -0.25,
        "by": "AAEC", "s": "héllo", "fx": "AQID", "e": "GREEN", "a": [1, -2, 3],
        "m": {"k": "v"}, "u": "text", "r": {"x": 1}, "r2": {"x": 2},
        "date": "2024-02-29", "tms": "10:11:12.5", "tus": "23:59:59.000001",
        "tsm": "2024-01-01 10:00:00.123", "tsu": "1969-12-31 23:59:59.999999",
        "tsn": "2024-01-01 10:00:00.123456789", "lts": "2024-01-01 00:00:00",
        "dec": "-12.34", "decf": "123456.789",
        "uu": "67e55044-10b1-426f-9247-bb680e5fe0c8",
        "dur": {"months": 1, "days": 2, "millis": 3}
    })
}

#[test]
fn round_trips_every_type_and_agrees_with_apache_avro() {
    let text = all_types().to_string();
    let ours = AvroSchema::parse(&text).unwrap();
    let mut bytes = Vec::new();
    ours.encode(&sample(), &mut bytes).unwrap();
    assert_eq!(ours.decode(&bytes).unwrap(), sample());
    // apache-avro reads our bytes into the same values.
    let theirs = Schema::parse_str(&text).unwrap();
    let value = GenericDatumReader::builder(&theirs)
        .build()
        .unwrap()
        .read_value(&mut &bytes[..])
        .unwrap();
    let AV::Record(fields) = &value else {
        panic!("record expected")
    };
    let get = |name: &str| fields.iter().find(|(n, _)| n == name).unwrap().1.clone();
    assert_eq!(get("l"), AV::Long(1 << 40));
    assert_eq!(get("s"), AV::String("héllo".into()));
    assert_eq!(get("e"), AV::Enum(1, "GREEN".into()));
    assert_eq!(get("u"), AV::Union(2, Box::new(AV::String("text".into()))));
    assert_eq!(get("date"), AV::Date(19_782));
    assert_eq!(get("tms"), AV::TimeMillis(36_672_500));
    assert_eq!(get("tsu"), AV::TimestampMicros(-1));
    assert_eq!(get("tsn"), AV::TimestampNanos(1_704_103_200_123_456_789));
    assert_eq!(
        get("dec"),
        AV::Decimal(apache_avro::Decimal::from(
            (-1234i64).to_be_bytes().to_vec()
        ))
    );
    // And we read what apache-avro writes.
    let written = GenericDatumWriter::builder(&theirs)
        .build()
        .unwrap()
        .write_value_to_vec(value)
        .unwrap();
    assert_eq!(written, bytes);
}

#[test]
fn lenient_encoding_and_precise_errors() {
    let schema = AvroSchema::parse(&all_types().to_string()).unwrap();
    let mut lenient = sample();
    lenient["i"] = json!("-7");
    lenient["d"] = json!("-0.25");
    lenient["tsm"] = json!(1_704_103_200_123i64);
    lenient["dec"] = json!(-12.34);
    lenient["date"] = json!(19_782);
    let (mut a, mut b) = (Vec::new(), Vec::new());
    schema.encode(&lenient, &mut a).unwrap();
    schema.encode(&sample(), &mut b).unwrap();
    assert_eq!(a, b);
    for (field, value, needle) in [
        ("i", json!(1_i64 << 40), "field `i`: expected int"),
        ("a", json!([1, "x"]), "field `a.1`: expected long"),
        (
            "r",
            json!({"y": 1}),
            "field `r.x`: expected int, got missing field",
        ),
        ("e", json!("BLUE"), "enum symbols"),
        ("fx", json!("AQ=="), "1 bytes for fixed(3)"),
        ("dec", json!("1.234"), "decimal(10, 2)"),
        ("u", json!([1]), "one of [null, long, string]"),
        ("uu", json!("nope"), "expected uuid"),
        ("m", json!({"k": [5]}), "field `m.k`"),
    ] {
        let mut v = sample();
        v[field] = value;
        let err = schema.encode(&v, &mut Vec::new()).unwrap_err().to_string();
        assert!(err.contains(needle), "{field}: {err}");
    }
    let mut missing = sample();
    missing.as_object_mut().unwrap().remove("s");
    let err = schema.encode(&missing, &mut Vec::new()).unwrap_err();
    assert_eq!(err.path, "s");
    // Missing nullable fields become null; defaults are used.
    let opt = AvroSchema::parse(
        &json!({"type": "record", "name": "O", "fields": [
            {"name": "a", "type": ["null", "int"]},
            {"name": "b", "type": "string", "default": "dflt"}]})
        .to_string(),
    )
    .unwrap();
    let mut out = Vec::new();
    opt.encode_object(&Map::new(), &mut out).unwrap();
    assert_eq!(opt.decode(&out).unwrap(), json!({"a": null, "b": "dflt"}));
}

#[test]
fn schema_errors() {
    for (schema, needle) in [
        (
            json!({"type": "record", "name": "L", "fields": [
            {"name": "next", "type": ["null", "L"]}]}),
            "recursive",
        ),
        (
            json!({"type": "record", "name": "R", "fields": [
            {"name": "x", "type": "Nope"}]}),
            "unknown type `Nope`",
        ),
        (
            json!({"type": "record", "name": "R", "fields": [
            {"name": "x", "type": "int"}, {"name": "x", "type": "int"}]}),
            "twice",
        ),
        (json!(["null", ["int"]]), "union"),
        (json!({"type": "enum", "name": "E"}), "symbols"),
        (json!({"type": "fixed", "name": "F", "size": -1}), "size"),
        (json!(5), "expected a type"),
    ] {
        let err = AvroSchema::parse(&schema.to_string())
            .unwrap_err()
            .to_string();
        assert!(err.contains(needle), "{schema}: {err}");
    }
    let mut deep = json!("int");
    for _ in 0..70 {
        deep = json!({"type": "array", "items": deep});
    }
    let err = AvroSchema::parse(&deep.to_string())
        .unwrap_err()
        .to_string();
    assert!(err.contains("deeper"), "{err}");
    // Exponential expansion of named types is bounded.
    let mut fields = vec![
        json!({"name": "f0", "type": {"type": "record", "name": "T0",
        "fields": [{"name": "a", "type": "int"}, {"name": "b", "type": "int"}]}}),
    ];
    for i in 1..20 {
        fields.push(json!({"name": format!("f{i}"), "type": {"type": "record",
            "name": format!("T{i}"), "fields": [
                {"name": "a", "type": format!("T{}", i - 1)},
                {"name": "b", "type": format!("T{}", i - 1)}]}}));
    }
    let wide = json!({"type": "record", "name": "W", "fields": fields});
    let err = AvroSchema::parse(&wide.to_string())
        .unwrap_err()
        .to_string();
    assert!(err.contains("schema nodes"), "{err}");
    // Invalid logical types fall back to the base type.
    let odd = AvroSchema::parse(r#"{"type": "long", "logicalType": "date"}"#).unwrap();
    let mut out = Vec::new();
    odd.encode(&json!(5), &mut out).unwrap();
    assert_eq!(odd.decode(&out).unwrap(), json!(5));
}

#[test]
fn hostile_bytes_fail_without_allocating() {
    let s = AvroSchema::parse(r#""string""#).unwrap();
    // Length 2^62 claimed by a 10-byte input.
    let mut huge = Vec::new();
    put_long(&mut huge, 1 << 62);
    let err = s.decode(&huge).unwrap_err().to_string();
    assert!(err.contains("exceeds"), "{err}");
    let nulls = AvroSchema::parse(r#"{"type": "array", "items": "null"}"#).unwrap();
    let mut many = Vec::new();
    put_long(&mut many, 1 << 40);
    let err = nulls.decode(&many).unwrap_err().to_string();
    assert!(err.contains("zero-byte"), "{err}");
    // Nested: many small arrays of nulls share one budget.
    let nested =
        AvroSchema::parse(r#"{"type": "array", "items": {"type": "array", "items": "null"}}"#)
            .unwrap();
    let mut bomb = Vec::new();
    put_long(&mut bomb, 1000);
    for _ in 0..1000 {
        put_long(&mut bomb, 60_000);
        bomb.push(0);
    }
    bomb.push(0);
    let err = nested.decode(&bomb).unwrap_err().to_string();
    assert!(err.contains("zero-byte"), "{err}");
    let mut negative_block = Vec::new();
    put_long(&mut negative_block, -2);
    put_long(&mut negative_block, 0);
    negative_block.push(0);
    assert_eq!(nulls.decode(&negative_block).unwrap(), json!([null, null]));
    let int = AvroSchema::parse(r#""int""#).unwrap();
    assert!(int.decode(&[0x80; 11]).is_err());
    assert!(int.decode(&[0xFF, 0xFF, 0xFF, 0xFF, 0x7F]).is_err());
    assert!(
        int.decode(&[2, 0])
            .unwrap_err()
            .to_string()
            .contains("1 bytes left")
    );
    let u = AvroSchema::parse(r#"["null", "int"]"#).unwrap();
    assert!(
        u.decode(&[4])
            .unwrap_err()
            .to_string()
            .contains("union index 2")
    );
    let b = AvroSchema::parse(r#""boolean""#).unwrap();
    assert!(b.decode(&[2]).is_err());
    assert!(
        s.decode(&[2, 0xFF])
            .unwrap_err()
            .to_string()
            .contains("UTF-8")
    );
}

#[test]
fn confluent_frames() {
    assert_eq!(
        split_confluent(&[0, 0, 0, 1, 2, 9]).unwrap(),
        (258, &[9u8][..])
    );
    assert_eq!(split_confluent(&[0, 0, 0, 0, 1]).unwrap(), (1, &[][..]));
    for (bytes, needle) in [
        (&[][..], "empty"),
        (&[1, 0, 0, 0, 1][..], "magic byte 0, got 1"),
        (&[0, 0, 0][..], "too short"),
    ] {
        let err = split_confluent(bytes).unwrap_err().to_string();
        assert!(err.contains(needle), "{err}");
    }
}

#[test]
fn debezium_connect_names_become_hints() {
    let schema = crate::codec::testkit::debezium_avro_schema();
    let hints = schema.row_hints().unwrap();
    assert_eq!(hints.get("updated_at"), Some(&Semantic::EpochMicros));
    assert_eq!(hints.get("born"), Some(&Semantic::EpochDays));
    // `weight` is an Avro decimal already: no hint.
    assert_eq!(hints.get("weight"), None);
    // Connect decimals without a logical type are decimals.
    let bare = AvroSchema::parse(
        r#"{"type": "bytes", "connect.name": "org.apache.kafka.connect.data.Decimal",
            "connect.parameters": {"scale": "2"}}"#,
    )
    .unwrap();
    assert_eq!(bare.decode(&[4, 0x04, 0xD2]).unwrap(), json!("12.34"));
}
