//! Writing Avro's binary encoding: the few primitives both the JSON encoder of the codec
//! and Paimon's manifest writer are built from, so that a varint or a collection block is
//! written one way everywhere.

use std::convert::Infallible;

/// Appends a zig-zag varint (`int` or `long`).
pub(crate) fn put_long(out: &mut Vec<u8>, v: i64) {
    let mut z = ((v << 1) ^ (v >> 63)) as u64;
    while z >= 0x80 {
        out.push((z as u8) | 0x80);
        z >>= 7;
    }
    out.push(z as u8);
}

/// Appends `bytes` (or a UTF-8 `string`): length then content.
pub(crate) fn put_bytes(out: &mut Vec<u8>, bytes: &[u8]) {
    put_long(out, bytes.len() as i64);
    out.extend_from_slice(bytes);
}

/// Appends an array or map: one block holding every item (none when empty), then the
/// empty block that ends it. `put` writes one item and may refuse it.
pub(crate) fn put_collection<T, E>(
    out: &mut Vec<u8>,
    items: impl ExactSizeIterator<Item = T>,
    mut put: impl FnMut(&mut Vec<u8>, T) -> Result<(), E>,
) -> Result<(), E> {
    if items.len() > 0 {
        put_long(out, items.len() as i64);
        for item in items {
            put(out, item)?;
        }
    }
    put_long(out, 0);
    Ok(())
}

/// [`put_collection`] for items that are always written.
pub(crate) fn put_items<T>(
    out: &mut Vec<u8>,
    items: impl ExactSizeIterator<Item = T>,
    mut put: impl FnMut(&mut Vec<u8>, T),
) {
    let written: Result<(), Infallible> = put_collection(out, items, |out, item| {
        put(out, item);
        Ok(())
    });
    let Ok(()) = written;
}

/// Appends an array of strings.
pub(crate) fn put_strings(out: &mut Vec<u8>, items: &[String]) {
    put_items(out, items.iter(), |out, s| put_bytes(out, s.as_bytes()));
}
