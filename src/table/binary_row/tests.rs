//! Tests of `table::binary_row`: the byte layouts of the format's worked examples, every
//! slot type, Java's null images, corrupt input, and proptests over random rows.

use super::*;
use crate::table::datum::compare_datums;
use crate::table::testkit::{example_partition, unhex};
use crate::table::types::MAX_LENGTH;
use proptest::prelude::*;
use std::cmp::Ordering;

const STRING: DataType = DataType::Varchar(MAX_LENGTH);

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[test]
fn example_a_int_key() {
    let bytes = serialize(&[Datum::Int(1)], &[DataType::Int]).unwrap();
    assert_eq!(bytes, unhex("00000001 0000000000000000 0100000000000000"));
    let max = serialize(&[Datum::Int(2)], &[DataType::Int]).unwrap();
    assert_eq!(max, unhex("00000001 0000000000000000 0200000000000000"));
    assert_eq!(
        deserialize(&bytes, &[DataType::Int]).unwrap(),
        vec![Datum::Int(1)]
    );
}

#[test]
fn example_b_long_string_partition() {
    let values = [Datum::String("2024-01-01".into())];
    let bytes = serialize(&values, &[STRING]).unwrap();
    assert_eq!(
        hex(&bytes),
        "00000001\
         0000000000000000\
         0a00000010000000\
         323032342d30312d\
         3031000000000000"
    );
    assert_eq!(deserialize(&bytes, &[STRING]).unwrap(), values);
}

#[test]
fn example_c_four_partition_values() {
    let (types, values) = example_partition();
    let bytes = serialize(&values, &types).unwrap();
    assert_eq!(
        hex(&bytes),
        "00000004\
         0000000000000000\
         0700000000000000\
         0b4d000000000000\
         6120622f633d6487\
         0100000000000000"
    );
    assert_eq!(deserialize(&bytes, &types).unwrap(), values);
}

#[test]
fn example_d_null_and_inline_string() {
    let types = [DataType::BigInt, STRING];
    let values = [Datum::Null, Datum::String("abc".into())];
    let bytes = encode(&values, &types).unwrap();
    assert_eq!(
        hex(&bytes),
        "0001000000000000\
         0000000000000000\
         6162630000000083"
    );
    let serialized = serialize(&values, &types).unwrap();
    assert_eq!(deserialize(&serialized, &types).unwrap(), values);
}

#[test]
fn empty_row_and_arity() {
    assert_eq!(serialize(&[], &[]).unwrap(), EMPTY_SERIALIZED_ROW);
    assert_eq!(
        deserialize(&EMPTY_SERIALIZED_ROW, &[]).unwrap(),
        Vec::<Datum>::new()
    );
    assert_eq!(arity(&EMPTY_SERIALIZED_ROW).unwrap(), 0);
    assert_eq!(arity(&[0, 0, 0, 3, 9]).unwrap(), 3);
    assert!(arity(&[0, 0, 1]).is_err());
    assert!(arity(&[0xFF, 0xFF, 0xFF, 0xFF]).is_err());
}

#[test]
fn null_bit_area_grows_past_56_fields() {
    assert_eq!(null_bits_width(0), 8);
    assert_eq!(null_bits_width(56), 8);
    assert_eq!(null_bits_width(57), 16);
    assert_eq!(null_bits_width(120), 16);
    assert_eq!(null_bits_width(121), 24);
    let types = vec![DataType::Int; 60];
    let mut values = vec![Datum::Int(5); 60];
    values[59] = Datum::Null;
    let bytes = encode(&values, &types).unwrap();
    assert_eq!(bytes.len(), 16 + 60 * 8);
    // Field 59 -> bit 67 -> byte 8, bit 3.
    assert_eq!(bytes[8], 1 << 3);
    assert_eq!(decode(&bytes, &types).unwrap(), values);
}

#[test]
fn every_fixed_type_slot() {
    let cases: Vec<(DataType, Datum, &str)> = vec![
        (DataType::Boolean, Datum::Boolean(false), "0000000000000000"),
        (DataType::TinyInt, Datum::TinyInt(-1), "ff00000000000000"),
        (DataType::SmallInt, Datum::SmallInt(-2), "feff000000000000"),
        (DataType::Int, Datum::Int(-1), "ffffffff00000000"),
        (DataType::BigInt, Datum::BigInt(-1), "ffffffffffffffff"),
        (DataType::Float, Datum::Float(1.0), "0000803f00000000"),
        (DataType::Double, Datum::Double(1.0), "000000000000f03f"),
        (DataType::Date, Datum::Date(-1), "ffffffff00000000"),
        (
            DataType::Decimal {
                precision: 10,
                scale: 2,
            },
            Datum::Decimal(-1230),
            "32fbffffffffffff",
        ),
        (
            DataType::Timestamp(3),
            Datum::Timestamp(Timestamp {
                millis: 1_704_103_200_123,
                nanos_of_milli: 0,
            }),
            "7b4577c48c010000",
        ),
        (
            DataType::Varbinary(10),
            Datum::Bytes(vec![]),
            "0000000000000080",
        ),
        (
            STRING,
            Datum::String(String::new().into()),
            "0000000000000080",
        ),
        (
            DataType::Char(7),
            Datum::String("abcdefg".into()),
            "6162636465666787",
        ),
    ];
    for (ty, value, slot) in cases {
        let bytes = encode(std::slice::from_ref(&value), &[ty]).unwrap();
        assert_eq!(hex(&bytes), format!("0000000000000000{slot}"), "{ty}");
        assert_eq!(decode(&bytes, &[ty]).unwrap(), vec![value], "{ty}");
    }
}

#[test]
fn variable_part_types() {
    // 8-byte binary goes to the variable part.
    let bytes = encode(&[Datum::Bytes((1..=8).collect())], &[DataType::Binary(8)]).unwrap();
    assert_eq!(
        hex(&bytes),
        "0000000000000000 0800000010000000 0102030405060708".replace(' ', "")
    );
    // Big decimal: minimal big-endian two's complement, 16 bytes reserved.
    let ty = DataType::Decimal {
        precision: 38,
        scale: 0,
    };
    let bytes = encode(&[Datum::Decimal(-129)], &[ty]).unwrap();
    assert_eq!(
        hex(&bytes),
        "0000000000000000 0200000010000000 ff7f000000000000 0000000000000000".replace(' ', "")
    );
    // Java writes -128 as the single byte 0x80 (pypaimon writes ff80).
    let bytes = encode(&[Datum::Decimal(-128)], &[ty]).unwrap();
    assert_eq!(
        hex(&bytes),
        "0000000000000000 0100000010000000 8000000000000000 0000000000000000".replace(' ', "")
    );
    let bytes = encode(&[Datum::Decimal(0)], &[ty]).unwrap();
    assert_eq!(&bytes[8..16], &[1, 0, 0, 0, 16, 0, 0, 0]);
    // pypaimon's longer form decodes to the same value.
    let mut pypaimon = bytes.clone();
    pypaimon[8] = 2;
    pypaimon[16] = 0xFF;
    pypaimon[17] = 0x80;
    assert_eq!(
        decode(&pypaimon, &[ty]).unwrap(),
        vec![Datum::Decimal(-128)]
    );
    // Timestamp(6): millis in the variable part, nanos in the slot.
    let ts = Timestamp {
        millis: 1_704_103_200_123,
        nanos_of_milli: 456_000,
    };
    let bytes = encode(&[Datum::Timestamp(ts)], &[DataType::TimestampLtz(6)]).unwrap();
    assert_eq!(
        hex(&bytes),
        "0000000000000000 40f5060010000000 7b4577c48c010000".replace(' ', "")
    );
    assert_eq!(
        decode(&bytes, &[DataType::TimestampLtz(6)]).unwrap(),
        vec![Datum::Timestamp(ts)]
    );
}

#[test]
fn decimal_extremes() {
    let ty = DataType::Decimal {
        precision: 38,
        scale: 10,
    };
    for v in [
        POW10[38] - 1,
        -(POW10[38] - 1),
        i128::from(i64::MIN),
        1,
        -1,
        127,
        128,
    ] {
        let bytes = serialize(&[Datum::Decimal(v)], &[ty]).unwrap();
        assert_eq!(deserialize(&bytes, &[ty]).unwrap(), vec![Datum::Decimal(v)]);
    }
    assert!(matches!(
        encode(&[Datum::Decimal(POW10[38])], &[ty]),
        Err(Error::Data(_))
    ));
    let compact = DataType::Decimal {
        precision: 18,
        scale: 0,
    };
    assert!(encode(&[Datum::Decimal(POW10[18] - 1)], &[compact]).is_ok());
    assert!(matches!(
        encode(&[Datum::Decimal(POW10[18])], &[compact]),
        Err(Error::Data(_))
    ));
}

#[test]
fn java_null_image_of_non_compact_types_is_accepted() {
    let types = [
        DataType::Decimal {
            precision: 20,
            scale: 2,
        },
        DataType::Timestamp(6),
        DataType::Int,
    ];
    // Java: null bits 0 and 1, slots (offset << 32) | 0, 16 + 8 reserved zero bytes.
    let java = unhex(
        "00000003
         0003000000000000
         0000000020000000
         0000000030000000
         0900000000000000
         0000000000000000 0000000000000000
         0000000000000000",
    );
    let row = deserialize(&java, &types).unwrap();
    assert_eq!(row, vec![Datum::Null, Datum::Null, Datum::Int(9)]);
    // Ours (pypaimon's image): nothing reserved.
    assert_eq!(
        hex(&serialize(&row, &types).unwrap()),
        "00000003 0003000000000000 0000000000000000 0000000000000000 0900000000000000"
            .replace(' ', "")
    );
}

#[test]
fn mismatched_values_are_data_errors_and_leave_buffer_untouched() {
    let mut buf = vec![1, 2, 3];
    let err = encode_into(&mut buf, &[Datum::String("x".into())], &[DataType::Int]);
    assert!(matches!(err, Err(Error::Data(_))));
    assert_eq!(buf, vec![1, 2, 3]);
    assert!(matches!(
        encode(&[Datum::Int(1)], &[DataType::Int, DataType::Int]),
        Err(Error::Data(_))
    ));
    let bad_ts = Datum::Timestamp(Timestamp {
        millis: 0,
        nanos_of_milli: 1_000_000,
    });
    assert!(matches!(
        serialize(&[bad_ts], &[DataType::Timestamp(9)]),
        Err(Error::Data(_))
    ));
    assert!(serialize_into(&mut buf, &[Datum::Int(1)], &[DataType::BigInt]).is_err());
    assert_eq!(buf, vec![1, 2, 3]);
}

#[test]
fn encode_into_offsets_are_relative_to_the_row() {
    let values = [Datum::String("longer than seven".into())];
    let mut buf = vec![0xAA; 5];
    encode_into(&mut buf, &values, &[STRING]).unwrap();
    assert_eq!(&buf[5..], encode(&values, &[STRING]).unwrap().as_slice());
}

#[test]
fn malformed_bytes_are_format_errors() {
    let types = [STRING];
    let good = serialize(&[Datum::String("a string of 20 bytes".into())], &types).unwrap();
    // 4 + 8 + 8 + 20 bytes are needed; the trailing padding is not.
    for cut in 0..40 {
        let r = deserialize(&good[..cut], &types);
        assert!(matches!(r, Err(Error::Format(_))), "cut {cut}");
    }
    assert!(deserialize(&good[..40], &types).is_ok());
    // Wrong arity.
    assert!(deserialize(&good, &[STRING, STRING]).is_err());
    // Inline length 8 is invalid.
    let bad_inline = unhex("00000001 0000000000000000 6162636465666788");
    assert!(deserialize(&bad_inline, &types).is_err());
    // Invalid UTF-8.
    let bad_utf8 = unhex("00000001 0000000000000000 ff00000000000081");
    assert!(deserialize(&bad_utf8, &types).is_err());
    // Oversized decimal length.
    let ty = [DataType::Decimal {
        precision: 30,
        scale: 0,
    }];
    let bad_dec =
        unhex("00000001 0000000000000000 1100000010000000 00000000000000000000000000000000 00");
    assert!(deserialize(&bad_dec, &ty).is_err());
}

#[test]
fn decode_projected_reads_only_the_selected_fields() {
    let types = [DataType::Int, STRING, DataType::Double, STRING];
    let values = [
        Datum::Int(7),
        Datum::String("a string longer than seven bytes".into()),
        Datum::Null,
        Datum::String("short".into()),
    ];
    let body = encode(&values, &types).unwrap();
    assert_eq!(
        decode_projected(&body, &types, &[3, 0, 2, 3]).unwrap(),
        vec![
            values[3].clone(),
            values[0].clone(),
            Datum::Null,
            values[3].clone()
        ]
    );
    assert_eq!(decode_projected(&body, &types, &[]).unwrap(), vec![]);
    let err = decode_projected(&body, &types, &[4]).unwrap_err();
    assert!(matches!(err, Error::Format(_)), "{err}");
    assert!(decode_projected(&body[..20], &types, &[0]).is_err());
}

#[test]
fn field_images_compare_values_across_rows_and_positions() {
    let big_decimal = DataType::Decimal {
        precision: 30,
        scale: 2,
    };
    let micros = DataType::Timestamp(6);
    let types = [STRING, DataType::BigInt, big_decimal, micros, STRING];
    let ts = Timestamp {
        millis: 1_700_000_000_123,
        nanos_of_milli: 456_000,
    };
    let values = [
        Datum::String("abc".into()),
        Datum::BigInt(-5),
        Datum::Decimal(-12_345_678_901_234_567_890),
        Datum::Timestamp(ts),
        Datum::String("a longer string value".into()),
    ];
    let row = encode(&values, &types).unwrap();
    for (i, (value, ty)) in values.iter().zip(&types).enumerate() {
        // The same value alone in a one-field row has the same image.
        let alone = encode(std::slice::from_ref(value), &[*ty]).unwrap();
        let a = field_image(&row, types.len(), i, ty).unwrap().unwrap();
        let b = field_image(&alone, 1, 0, ty).unwrap().unwrap();
        assert_eq!(a, b, "field {i}");
    }
    let s = field_image(&row, 5, 0, &STRING).unwrap().unwrap();
    assert_eq!((s.word, s.bytes), (0, &b"abc"[..]));
    let s = field_image(&row, 5, 4, &STRING).unwrap().unwrap();
    assert_eq!(s.bytes, b"a longer string value");
    let t = field_image(&row, 5, 3, &micros).unwrap().unwrap();
    assert_eq!(t.word, 456_000);
    assert_eq!(t.bytes, ts.millis.to_le_bytes());
    // Different values, different images; null has none.
    let other = encode(&[Datum::String("abd".into())], &[STRING]).unwrap();
    assert_ne!(
        field_image(&other, 1, 0, &STRING).unwrap(),
        field_image(&row, 5, 0, &STRING).unwrap()
    );
    let null = encode(&[Datum::Null], &[DataType::Int]).unwrap();
    assert_eq!(field_image(&null, 1, 0, &DataType::Int).unwrap(), None);
    // Out of range position or bytes: errors, not panics.
    assert!(field_image(&row, 5, 5, &STRING).is_err());
    assert!(field_image(&row[..16], 5, 4, &STRING).is_err());
}

fn rows_equal(a: &[Datum], b: &[Datum]) -> bool {
    a.len() == b.len()
        && a.iter().zip(b).all(|(x, y)| match (x, y) {
            (Datum::Float(x), Datum::Float(y)) => x.to_bits() == y.to_bits(),
            (Datum::Double(x), Datum::Double(y)) => x.to_bits() == y.to_bits(),
            _ => compare_datums(x, y) == Ordering::Equal,
        })
}

fn type_strategy() -> impl Strategy<Value = DataType> {
    prop_oneof![
        Just(DataType::Boolean),
        Just(DataType::TinyInt),
        Just(DataType::SmallInt),
        Just(DataType::Int),
        Just(DataType::BigInt),
        Just(DataType::Float),
        Just(DataType::Double),
        Just(DataType::Date),
        (1u8..=38)
            .prop_flat_map(|p| (Just(p), 0..=p))
            .prop_map(|(precision, scale)| { DataType::Decimal { precision, scale } }),
        (1u32..20).prop_map(DataType::Char),
        Just(STRING),
        (1u32..20).prop_map(DataType::Binary),
        Just(DataType::Varbinary(MAX_LENGTH)),
        (0u8..=9).prop_map(DataType::Timestamp),
        (0u8..=9).prop_map(DataType::TimestampLtz),
    ]
}

fn value_strategy(ty: DataType) -> BoxedStrategy<Datum> {
    let value: BoxedStrategy<Datum> = match ty {
        DataType::Boolean => any::<bool>().prop_map(Datum::Boolean).boxed(),
        DataType::TinyInt => any::<i8>().prop_map(Datum::TinyInt).boxed(),
        DataType::SmallInt => any::<i16>().prop_map(Datum::SmallInt).boxed(),
        DataType::Int => any::<i32>().prop_map(Datum::Int).boxed(),
        DataType::BigInt => any::<i64>().prop_map(Datum::BigInt).boxed(),
        DataType::Float => any::<u32>()
            .prop_map(|b| Datum::Float(f32::from_bits(b)))
            .boxed(),
        DataType::Double => any::<u64>()
            .prop_map(|b| Datum::Double(f64::from_bits(b)))
            .boxed(),
        DataType::Date => any::<i32>().prop_map(Datum::Date).boxed(),
        DataType::Decimal { precision, .. } => {
            let limit = POW10[precision as usize];
            prop_oneof![
                (-limit + 1..limit),
                (-limit.min(1000) + 1..limit.min(1000)),
                Just(limit - 1),
                Just(-limit + 1),
            ]
            .prop_map(Datum::Decimal)
            .boxed()
        }
        DataType::Char(_) | DataType::Varchar(_) => {
            ".{0,20}".prop_map(|s| Datum::String(s.into())).boxed()
        }
        DataType::Binary(_) | DataType::Varbinary(_) => prop::collection::vec(any::<u8>(), 0..24)
            .prop_map(Datum::Bytes)
            .boxed(),
        DataType::Timestamp(p) | DataType::TimestampLtz(p) => {
            let nanos = if p <= 3 { 0..1u32 } else { 0..1_000_000u32 };
            (any::<i64>(), nanos)
                .prop_map(|(millis, nanos_of_milli)| {
                    Datum::Timestamp(Timestamp {
                        millis,
                        nanos_of_milli,
                    })
                })
                .boxed()
        }
    };
    prop_oneof![1 => Just(Datum::Null), 4 => value].boxed()
}

fn row_strategy() -> impl Strategy<Value = (Vec<DataType>, Vec<Datum>)> {
    prop::collection::vec(type_strategy(), 0..70).prop_flat_map(|types| {
        let values: Vec<_> = types.iter().map(|t| value_strategy(*t)).collect();
        (Just(types), values)
    })
}

proptest! {
    #[test]
    fn serialize_round_trips((types, values) in row_strategy()) {
        let bytes = serialize(&values, &types).unwrap();
        prop_assert_eq!(arity(&bytes).unwrap(), values.len());
        prop_assert_eq!((bytes.len() - 4) % 8, 0);
        let back = deserialize(&bytes, &types).unwrap();
        prop_assert!(rows_equal(&back, &values), "{:?} != {:?}", back, values);
    }

    #[test]
    fn projections_and_images_agree_with_decode((types, values) in row_strategy()) {
        let body = encode(&values, &types).unwrap();
        let reversed: Vec<usize> = (0..types.len()).rev().collect();
        let mut projected = decode_projected(&body, &types, &reversed).unwrap();
        projected.reverse();
        prop_assert!(rows_equal(&projected, &values), "{:?} != {:?}", projected, values);
        for (i, (value, ty)) in values.iter().zip(&types).enumerate() {
            let alone = encode(std::slice::from_ref(value), &[*ty]).unwrap();
            let image = field_image(&body, types.len(), i, ty).unwrap();
            prop_assert_eq!(image, field_image(&alone, 1, 0, ty).unwrap());
            prop_assert_eq!(image.is_none(), value.is_null());
        }
    }

    /// A projection copied from the bytes is exactly the encoding of the projected
    /// values, and each of its fields reads in place as it decodes.
    #[test]
    fn projected_bytes_encode_the_projected_values(
        (types, values) in row_strategy(),
        picks in prop::collection::vec(any::<prop::sample::Index>(), 0..12),
    ) {
        let body = encode(&values, &types).unwrap();
        let positions: Vec<usize> = if types.is_empty() {
            Vec::new()
        } else {
            picks.iter().map(|i| i.index(types.len())).collect()
        };
        let mut projected = vec![0xAA];
        project_into(&mut projected, &body, &types, &positions).unwrap();
        let wanted_types: Vec<DataType> = positions.iter().map(|&p| types[p]).collect();
        let wanted: Vec<Datum> = positions.iter().map(|&p| values[p].clone()).collect();
        prop_assert_eq!(&projected[1..], &encode(&wanted, &wanted_types).unwrap()[..]);
        for (i, (value, ty)) in wanted.iter().zip(&wanted_types).enumerate() {
            let read = field_value(&projected[1..], wanted.len(), i, ty).unwrap();
            let as_datum = match read {
                FieldValue::Null => Datum::Null,
                FieldValue::Text(s) => Datum::String(String::from_utf8(s.to_vec()).unwrap().into()),
                FieldValue::Datum(d) => d,
            };
            prop_assert!(rows_equal(std::slice::from_ref(&as_datum), std::slice::from_ref(value)), "{:?} != {:?}", as_datum, value);
        }
    }

    /// The partition and bucket a writer computes from a row's columns in place equal
    /// those of the copied column values.
    #[test]
    fn columns_in_place_serialize_and_bucket_as_their_copies(
        (types, values) in row_strategy(),
        picks in prop::collection::vec(any::<prop::sample::Index>(), 0..6),
        buckets in 1..64i32,
    ) {
        let positions: Vec<usize> = if types.is_empty() {
            Vec::new()
        } else {
            picks.iter().map(|i| i.index(types.len())).collect()
        };
        let wanted_types: Vec<DataType> = positions.iter().map(|&p| types[p]).collect();
        let wanted: Vec<Datum> = positions.iter().map(|&p| values[p].clone()).collect();
        let mut out = vec![0xAA];
        serialize_columns_into(&mut out, &values, &positions, &wanted_types).unwrap();
        prop_assert_eq!(&out[1..], &serialize(&wanted, &wanted_types).unwrap()[..]);
        let mut scratch = vec![1, 2, 3];
        let bucket = crate::table::bucket::bucket_of_columns(
            &mut scratch, &values, &positions, &wanted_types, buckets,
        ).unwrap();
        prop_assert_eq!(bucket, crate::table::bucket::bucket_of(&wanted, &wanted_types, buckets).unwrap());
    }

    #[test]
    fn deserialize_never_panics_on_garbage(
        bytes in prop::collection::vec(any::<u8>(), 0..200),
        types in prop::collection::vec(type_strategy(), 0..8),
    ) {
        let _ = deserialize(&bytes, &types);
        let _ = decode(&bytes, &types);
        let _ = arity(&bytes);
        for (i, ty) in types.iter().enumerate() {
            let _ = field_image(&bytes, types.len(), i, ty);
            let _ = decode_projected(&bytes, &types, &[i]);
            let _ = field_value(&bytes, types.len(), i, ty);
            let _ = project_into(&mut Vec::new(), &bytes, &types, &[i, i]);
        }
    }

    #[test]
    fn deserialize_never_panics_on_corrupted_rows(
        (types, values) in row_strategy(),
        flips in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..6),
        cut in any::<prop::sample::Index>(),
    ) {
        let mut bytes = serialize(&values, &types).unwrap();
        for (at, byte) in flips {
            let i = at.index(bytes.len());
            bytes[i] = byte;
        }
        let _ = deserialize(&bytes, &types);
        let end = cut.index(bytes.len() + 1);
        let _ = deserialize(&bytes[..end], &types);
        let body = bytes.get(4..end.max(4)).unwrap_or_default();
        for (i, ty) in types.iter().enumerate() {
            let _ = field_image(body, types.len(), i, ty);
        }
    }
}

#[test]
fn encode_columns_into_encodes_the_chosen_columns_in_their_order() {
    let row = [
        Datum::Int(7),
        Datum::String("longer than seven".into()),
        Datum::BigInt(-3),
    ];
    let mut out = vec![0xAA; 3];
    encode_columns_into(&mut out, &row, &[2, 1], &[DataType::BigInt, STRING]).unwrap();
    let expected = encode(
        &[row[2].clone(), row[1].clone()],
        &[DataType::BigInt, STRING],
    )
    .unwrap();
    assert_eq!(&out[3..], expected.as_slice());
    // A column out of range, or types that do not match the columns, leave `out` as it was.
    let r = encode_columns_into(&mut out, &row, &[3], &[DataType::Int]);
    assert!(matches!(r, Err(Error::Data(_))), "{r:?}");
    let r = encode_columns_into(&mut out, &row, &[0, 1], &[DataType::Int]);
    assert!(r.is_err(), "{r:?}");
    assert_eq!(&out[3..], expected.as_slice());
}
