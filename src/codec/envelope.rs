//! The envelope checks the CDC formats share: the payload as the message's root object,
//! the member naming the event's kind (Debezium `op`, Canal and Maxwell `type`), row
//! images that may be absent and those the kind needs, and the metadata members.
//!
//! Debezium, Canal and Maxwell each used to spell these checks out; written once, every
//! format rejects a bad envelope for the same reasons and in the same words
//! (``field `op`: expected a string, got a number``).

use serde_json::{Map, Value};

use super::Ctx;
use super::error::{DecodeError, Part};
use super::json_value::{parse_object, type_name};
use super::row::MessageMeta;

/// The payload as the message's root object; `None` for a tombstone (null payload),
/// which every envelope format skips.
pub(crate) fn root(ctx: &Ctx<'_, '_>) -> Result<Option<Map<String, Value>>, DecodeError> {
    ctx.record
        .payload
        .map(|payload| parse_object(payload, Part::Payload))
        .transpose()
}

/// The string member `field` naming the kind of event. Its absence means the record is
/// not of the format at all, which `not_what` says (`"a Canal message"`).
pub(crate) fn event_kind<'a>(
    root: &'a Map<String, Value>,
    field: &str,
    not_what: &str,
) -> Result<&'a str, DecodeError> {
    match root.get(field) {
        Some(Value::String(kind)) => Ok(kind),
        None | Some(Value::Null) => Err(DecodeError::envelope(
            field,
            format!("missing; not {not_what}"),
        )),
        Some(other) => Err(DecodeError::envelope(
            field,
            format!("expected a string, got {}", type_name(other)),
        )),
    }
}

/// An event kind the format does not have: `noun` is what the format calls it (`type`,
/// `operation`), `expected` lists the kinds it has.
pub(crate) fn unknown_kind(field: &str, noun: &str, kind: &str, expected: &str) -> DecodeError {
    DecodeError::envelope(
        field,
        format!("unknown {noun} {kind:?}; expected {expected}"),
    )
}

/// The object in `field` (a row image); `None` when missing or null.
pub(crate) fn object<'a>(
    root: &'a Map<String, Value>,
    field: &str,
) -> Result<Option<&'a Map<String, Value>>, DecodeError> {
    match root.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Object(o)) => Ok(Some(o)),
        Some(other) => Err(DecodeError::envelope(
            field,
            format!("expected an object or null, got {}", type_name(other)),
        )),
    }
}

/// The row image in `field` that an event of kind `kind` (in member `kind_field`) cannot
/// do without.
pub(crate) fn required<'a>(
    image: Option<&'a Map<String, Value>>,
    field: &str,
    kind_field: &str,
    kind: &str,
) -> Result<&'a Map<String, Value>, DecodeError> {
    image.ok_or_else(|| {
        DecodeError::envelope(field, format!("missing or null for {kind_field} {kind:?}"))
    })
}

/// An integer metadata member (an epoch timestamp); `None` when absent or not one, since
/// metadata never rejects a change.
pub(crate) fn int(object: &Map<String, Value>, field: &str) -> Option<i64> {
    object.get(field)?.as_i64()
}

/// A text metadata member; `None` when absent or not a string.
pub(crate) fn text<'a>(object: &'a Map<String, Value>, field: &str) -> Option<&'a str> {
    object.get(field)?.as_str()
}

/// The metadata of a flat message (Canal, Maxwell): `database` and `table` are members of
/// the root, the timestamps are as the format has them.
pub(crate) fn flat_meta(
    root: &Map<String, Value>,
    ingestion_ms: Option<i64>,
    source_ms: Option<i64>,
) -> MessageMeta<'_> {
    MessageMeta {
        ingestion_ms,
        source_ms,
        database: text(root, "database"),
        table: text(root, "table"),
    }
}
