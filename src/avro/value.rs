//! Decoding a datum into a positional [`Val`] that borrows its bytes from the input: for
//! readers that resolve the fields they want by position once per file (Paimon's
//! manifests hold many thousands of records), with no owned tree of names.

use super::{Cursor, Node, Result};

/// One decoded value. Records are positional (the writer's field order); strings, bytes
/// and fixed values borrow from the input; ints, longs and enum indexes are `Long`; a
/// union decodes to its branch's value; annotations are read as their encoding.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Val<'a> {
    Null,
    Bool(bool),
    Long(i64),
    Float(f32),
    Double(f64),
    Bytes(&'a [u8]),
    Array(Vec<Val<'a>>),
    Map(Vec<(&'a [u8], Val<'a>)>),
    Record(Vec<Val<'a>>),
}

impl Val<'_> {
    /// What kind of value this is, for messages (`an integer`).
    pub(crate) fn describe(&self) -> &'static str {
        match self {
            Val::Null => "null",
            Val::Bool(_) => "a boolean",
            Val::Long(_) => "an integer",
            Val::Float(_) | Val::Double(_) => "a floating-point number",
            Val::Bytes(_) => "bytes/string",
            Val::Array(_) => "an array",
            Val::Map(_) => "a map",
            Val::Record(_) => "a record",
        }
    }
}

/// Decodes one datum of `node` at the cursor.
pub(crate) fn read<'a, A>(node: &Node<A>, cur: &mut Cursor<'a>) -> Result<Val<'a>> {
    cur.start_datum();
    value(node, cur)
}

fn value<'a, A>(node: &Node<A>, cur: &mut Cursor<'a>) -> Result<Val<'a>> {
    Ok(match node {
        Node::Null => Val::Null,
        Node::Boolean => Val::Bool(cur.boolean()?),
        // No range check for `int`: the reader names the field that overflows.
        Node::Int | Node::Long => Val::Long(cur.long()?),
        Node::Float => Val::Float(cur.float()?),
        Node::Double => Val::Double(cur.double()?),
        Node::Bytes | Node::String => Val::Bytes(cur.bytes()?),
        Node::Fixed(n) => Val::Bytes(cur.take(*n)?),
        Node::Enum(symbols) => Val::Long(cur.index(symbols.len(), "enum")? as i64),
        Node::Array { items, item_min } => {
            Val::Array(cur.items(*item_min, |cur| value(items, cur))?)
        }
        // Every entry also has a key of at least one byte.
        Node::Map { values, value_min } => {
            Val::Map(cur.items(value_min.saturating_add(1), |cur| {
                Ok((cur.bytes()?, value(values, cur)?))
            })?)
        }
        Node::Union(branches) => value(cur.pick(branches, "union")?, cur)?,
        Node::Record(record) => Val::Record(
            record
                .fields
                .iter()
                .map(|f| value(&f.node, cur))
                .collect::<Result<_>>()?,
        ),
        Node::Annotated(_, inner) => value(inner, cur)?,
    })
}
