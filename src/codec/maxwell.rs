//! `maxwell-json`: Maxwell's messages.
//!
//! `type` is `insert`, `update` or `delete`; `data` is the row (after the change, or the
//! deleted row); for updates `old` holds the previous values of only the columns that
//! changed, so the before image is `data` overlaid with `old`. An update without `old`
//! becomes an upsert of `data`. `bootstrap-insert` rows are snapshot reads;
//! `bootstrap-start`/`bootstrap-complete` markers and DDL (`table-create`, `table-alter`,
//! `database-drop`, …, with `output_ddl`) are skipped. `ts` is in seconds; as metadata it
//! is scaled to milliseconds.

use serde_json::{Map, Value};

use super::error::{DecodeError, Part};
use super::json::{parse_object, type_name};
use super::row::{Emitter, MessageMeta};
use super::{Ctx, Decoded, SkipReason};

/// Decodes one Maxwell message.
pub(crate) fn decode(ctx: &Ctx<'_, '_>) -> Result<Decoded, DecodeError> {
    let Some(payload) = ctx.record.payload else {
        return Ok(Decoded::Skipped(SkipReason::Tombstone));
    };
    let root = parse_object(payload, Part::Payload)?;
    let kind = match root.get("type") {
        Some(Value::String(t)) => t.as_str(),
        None | Some(Value::Null) => {
            return Err(DecodeError::envelope(
                "type",
                "missing; not a Maxwell message",
            ));
        }
        Some(other) => {
            return Err(DecodeError::envelope(
                "type",
                format!("expected a string, got {}", type_name(other)),
            ));
        }
    };
    match kind {
        "insert" | "update" | "delete" | "bootstrap-insert" => {}
        "bootstrap-start" | "bootstrap-complete" => {
            return Ok(Decoded::Skipped(SkipReason::Other(format!(
                "Maxwell {kind} marker"
            ))));
        }
        ddl if ddl.starts_with("table-") || ddl.starts_with("database-") => {
            return Ok(Decoded::Skipped(SkipReason::Ddl(format!("Maxwell {ddl}"))));
        }
        other => {
            return Err(DecodeError::envelope(
                "type",
                format!(
                    "unknown type {other:?}; expected insert, update, delete or bootstrap-insert"
                ),
            ));
        }
    }
    let data = object(&root, "data")?.ok_or_else(|| {
        DecodeError::envelope("data", format!("missing or null for type {kind:?}"))
    })?;
    let ts_ms = root
        .get("ts")
        .and_then(Value::as_i64)
        .and_then(|s| s.checked_mul(1000));
    let meta = MessageMeta {
        ingestion_ms: ts_ms,
        source_ms: ts_ms,
        database: root.get("database").and_then(Value::as_str),
        table: root.get("table").and_then(Value::as_str),
    };
    let emit = Emitter {
        ctx,
        hints: None,
        meta,
    };
    let mut out = Vec::with_capacity(2);
    match kind {
        "insert" => emit.insert(data, &mut out)?,
        "bootstrap-insert" => {
            if !emit.snapshot(data, &mut out)? {
                return Ok(Decoded::Skipped(SkipReason::SnapshotRead));
            }
        }
        "update" => emit.update(object(&root, "old")?, data, &mut out)?,
        _ => emit.delete(data, &mut out)?,
    }
    Ok(Decoded::Changes(out))
}

/// The object in `field`; `None` when missing or null.
fn object<'a>(
    root: &'a Map<String, Value>,
    field: &str,
) -> Result<Option<&'a Map<String, Value>>, DecodeError> {
    match root.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Object(o)) => Ok(Some(o)),
        Some(other) => Err(DecodeError::envelope(
            field,
            format!("expected an object, got {}", type_name(other)),
        )),
    }
}
