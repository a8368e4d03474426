//! Tests of container files and block codecs: framing, the file-wide decompression cap
//! (stopping inside a block), corrupt blocks, and round trips that apache-avro reads.

use super::super::block::DECOMPRESS_CHUNK;
use super::*;

/// blocks, each (record count, block bytes as stored, i.e. compressed by `codec`).
fn raw_container(codec: BlockCodec, blocks: &[(usize, Vec<u8>)]) -> Vec<u8> {
    let sync = [7u8; SYNC_LEN];
    let mut out = MAGIC.to_vec();
    put_long(&mut out, 2);
    put_bytes(&mut out, b"avro.schema");
    put_bytes(&mut out, b"\"long\"");
    put_bytes(&mut out, b"avro.codec");
    put_bytes(&mut out, codec.name().as_bytes());
    put_long(&mut out, 0);
    out.extend_from_slice(&sync);
    for (count, data) in blocks {
        put_long(&mut out, *count as i64);
        put_bytes(&mut out, data);
        out.extend_from_slice(&sync);
    }
    out
}

/// `data` compressed as an Avro block of `codec`.
fn compressed(codec: BlockCodec, data: &[u8]) -> Vec<u8> {
    match codec {
        BlockCodec::Null => data.to_vec(),
        BlockCodec::Deflate => miniz_oxide::deflate::compress_to_vec(data, 6),
        BlockCodec::Snappy => {
            let mut out = snap::raw::Encoder::new().compress_vec(data).unwrap();
            out.extend_from_slice(&crc32fast::hash(data).to_be_bytes());
            out
        }
        BlockCodec::Zstandard => zstd::bulk::compress(data, 1).unwrap(),
    }
}

const CODECS: [BlockCodec; 4] = [
    BlockCodec::Null,
    BlockCodec::Deflate,
    BlockCodec::Snappy,
    BlockCodec::Zstandard,
];

const MIB: usize = 1 << 20;

fn assert_over_limit(result: Result<Container>, limit: usize, what: &str) {
    let err = match result {
        Ok(file) => panic!(
            "{what}: read {} blocks, expected an error",
            file.blocks.len()
        ),
        Err(e) => e.to_string(),
    };
    assert!(
        err.contains(&format!("more than {limit} bytes")),
        "{what}: {err}"
    );
}

#[test]
fn the_total_decompressed_size_of_a_file_is_capped() {
    // Three blocks of 400 KiB each: every block is under 1 MiB, the file is not.
    let block = vec![0u8; 400 << 10];
    for codec in CODECS {
        let data = compressed(codec, &block);
        let file = raw_container(codec, &vec![(block.len(), data); 3]);
        assert_over_limit(read_container(&file, MIB), MIB, codec.name());
        // Under a limit the file fits, it reads.
        let read = read_container(&file, 2 * MIB).unwrap();
        assert_eq!(read.blocks.len(), 3, "{}", codec.name());
        // A file exactly at the limit is read too.
        let exact = read_container(&file, 3 * block.len()).unwrap();
        assert_eq!(exact.blocks.len(), 3, "{}", codec.name());
    }
}

#[test]
fn decompression_stops_at_the_limit_inside_a_block() {
    // Each block would decompress to 4 MiB and then fail (a corrupt tail): a reader
    // that decompressed the whole block first would report the corruption; one that
    // stops at the 1 MiB limit reports the limit.
    let zeros = vec![0u8; 4 * MIB];
    // zstd: a valid 4 MiB frame followed by bytes that are no frame.
    let mut zstd_block = compressed(BlockCodec::Zstandard, &zeros);
    zstd_block.extend_from_slice(&[0xAB; 64]);
    // deflate: the stream cut before its end.
    let mut deflate_block = compressed(BlockCodec::Deflate, &zeros);
    deflate_block.truncate(deflate_block.len() - 8);
    // snappy: a header declaring 4 MiB, then nothing of it (checked before allocating).
    let mut snappy_block = Vec::new();
    put_varint_u64(&mut snappy_block, zeros.len() as u64);
    snappy_block.extend_from_slice(&[0u8; 4]);
    // null: the raw block itself is over the limit.
    let null_block = vec![0u8; 2 * MIB];
    for (codec, block) in [
        (BlockCodec::Zstandard, zstd_block),
        (BlockCodec::Deflate, deflate_block),
        (BlockCodec::Snappy, snappy_block),
        (BlockCodec::Null, null_block),
    ] {
        let file = raw_container(codec, &[(1, block)]);
        assert_over_limit(read_container(&file, MIB), MIB, codec.name());
    }
    // A snappy header declaring more than any address space is an error, not a panic.
    let mut huge = Vec::new();
    put_varint_u64(&mut huge, u64::from(u32::MAX));
    huge.extend_from_slice(&[0u8; 4]);
    let file = raw_container(BlockCodec::Snappy, &[(1, huge)]);
    assert!(read_container(&file, MIB).is_err());
}

#[test]
fn blocks_decompress_exactly_across_chunks() {
    // Bigger than several chunks, and not a multiple of the chunk size.
    let data: Vec<u8> = (0..3 * DECOMPRESS_CHUNK + 12_345)
        .map(|i| (i % 251) as u8 ^ (i / 4096) as u8)
        .collect();
    for codec in CODECS {
        let block = compressed(codec, &data);
        let out = codec.decompress(&block, usize::MAX).unwrap().unwrap();
        assert!(out == data, "{}", codec.name());
        let exact = codec.decompress(&block, data.len()).unwrap().unwrap();
        assert!(exact == data, "{}", codec.name());
        assert!(codec.decompress(&block, data.len() - 1).unwrap().is_none());
        // An empty block.
        let empty = compressed(codec, &[]);
        assert_eq!(codec.decompress(&empty, 0).unwrap(), Some(Vec::new()));
    }
}

#[test]
fn corrupt_blocks_under_the_limit_are_format_errors() {
    let data = vec![42u8; 100_000];
    for codec in [
        BlockCodec::Deflate,
        BlockCodec::Snappy,
        BlockCodec::Zstandard,
    ] {
        let mut block = compressed(codec, &data);
        block.truncate(block.len() / 2);
        let err = codec
            .decompress(&block, usize::MAX)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("does not decompress") || err.contains("checksum"),
            "{}: {err}",
            codec.name()
        );
    }
    let mut snappy = compressed(BlockCodec::Snappy, &data);
    let last = snappy.len() - 1;
    snappy[last] ^= 1;
    let err = BlockCodec::Snappy
        .decompress(&snappy, usize::MAX)
        .unwrap_err();
    assert!(err.to_string().contains("checksum"), "{err}");
}

proptest::proptest! {
    #[test]
    fn any_block_bytes_decompress_or_fail_cleanly(
        bytes in proptest::collection::vec(proptest::num::u8::ANY, 0..512),
        budget in 0usize..100_000,
    ) {
        for codec in CODECS {
            if let Ok(Some(out)) = codec.decompress(&bytes, budget) {
                proptest::prop_assert!(out.len() <= budget);
            }
        }
    }
}

/// Snappy's length preamble: an unsigned LEB128 varint.
fn put_varint_u64(buf: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        buf.push((v as u8) | 0x80);
        v >>= 7;
    }
    buf.push(v as u8);
}

#[test]
fn container_round_trip_with_every_codec() {
    let schema = r#"{"type":"record","name":"r","fields":[{"name":"a","type":"long"},{"name":"b","type":["null","string"]}]}"#;
    for codec in [
        BlockCodec::Null,
        BlockCodec::Deflate,
        BlockCodec::Snappy,
        BlockCodec::Zstandard,
    ] {
        let mut w = ContainerWriter::new(schema, codec);
        for i in 0..20_000i64 {
            w.append(|buf| {
                put_long(buf, i);
                put_long(buf, 1);
                put_bytes(buf, format!("value {i}").as_bytes());
            })
            .unwrap();
        }
        let bytes = w.finish().unwrap();
        let file = read_container(&bytes, usize::MAX).unwrap();
        assert_eq!(file.codec, codec);
        assert!(file.blocks.len() > 1, "expected several blocks");
        let mut n = 0i64;
        for block in &file.blocks {
            let mut cur = Cursor::new(&block.data);
            for _ in 0..block.count {
                let v = read(&file.schema, &mut cur).unwrap();
                let expected = format!("value {n}");
                assert_eq!(
                    v,
                    Val::Record(vec![Val::Long(n), Val::Bytes(expected.as_bytes())])
                );
                n += 1;
            }
            assert!(cur.at_end());
        }
        assert_eq!(n, 20_000);

        // apache-avro, an independent implementation, reads the same bytes.
        let reader = apache_avro::Reader::new(&bytes[..]).unwrap();
        assert_eq!(reader.count(), 20_000);
    }
}
