//! `canal-json`: Canal's flat messages.
//!
//! One message carries the changes of one statement: `type` (`INSERT`, `UPDATE`,
//! `DELETE`), `data` (the rows after the change, or the deleted rows) and, for updates,
//! `old`: per row of `data`, at the same index, the previous values of only the columns
//! that changed. The before image of `data[i]` is therefore `data[i]` overlaid with
//! `old[i]`. An update whose `old` (or `old[i]`) is missing becomes an upsert of the after
//! image. Messages with `isDdl: true` and DDL types (`CREATE`, `ALTER`, `ERASE`, `RENAME`,
//! `CINDEX`, `DINDEX`, `QUERY`, `TRUNCATE`) are skipped. Canal writes every value as a
//! string; they are coerced to the column types (`"1"` → `true` for BOOLEAN).

use serde_json::{Map, Value};

use super::error::{DecodeError, Part};
use super::json::{parse_object, type_name};
use super::row::{Emitter, MessageMeta};
use super::{Ctx, Decoded, SkipReason};

/// Decodes one Canal message.
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
                "missing; not a Canal message",
            ));
        }
        Some(other) => {
            return Err(DecodeError::envelope(
                "type",
                format!("expected a string, got {}", type_name(other)),
            ));
        }
    };
    if root.get("isDdl").and_then(Value::as_bool) == Some(true) {
        return Ok(Decoded::Skipped(if kind == "TRUNCATE" {
            SkipReason::Truncate
        } else {
            SkipReason::Ddl(ddl_text(&root, kind))
        }));
    }
    match kind {
        "INSERT" | "UPDATE" | "DELETE" => {}
        "TRUNCATE" => return Ok(Decoded::Skipped(SkipReason::Truncate)),
        "CREATE" | "ALTER" | "ERASE" | "RENAME" | "CINDEX" | "DINDEX" | "QUERY" => {
            return Ok(Decoded::Skipped(SkipReason::Ddl(ddl_text(&root, kind))));
        }
        other => {
            return Err(DecodeError::envelope(
                "type",
                format!("unknown type {other:?}; expected INSERT, UPDATE or DELETE"),
            ));
        }
    }
    let rows = objects(&root, "data")?.unwrap_or_default();
    let old = if kind == "UPDATE" {
        objects(&root, "old")?
    } else {
        None
    };
    let meta = MessageMeta {
        ingestion_ms: root.get("ts").and_then(Value::as_i64),
        source_ms: root.get("es").and_then(Value::as_i64),
        database: root.get("database").and_then(Value::as_str),
        table: root.get("table").and_then(Value::as_str),
    };
    let emit = Emitter {
        ctx,
        hints: None,
        meta,
    };
    let mut out = Vec::with_capacity(rows.len() * if kind == "UPDATE" { 2 } else { 1 });
    for (i, row) in rows.iter().enumerate() {
        let result = match kind {
            "INSERT" => emit.insert(row, &mut out),
            "UPDATE" => {
                let before = old.as_ref().and_then(|o| o.get(i)).copied();
                emit.update(before, row, &mut out)
            }
            _ => emit.delete(row, &mut out),
        };
        result.map_err(|e| e.in_row(i))?;
    }
    Ok(Decoded::Changes(out))
}

/// The array of objects in `field`; `None` when missing or null.
fn objects<'a>(
    root: &'a Map<String, Value>,
    field: &str,
) -> Result<Option<Vec<&'a Map<String, Value>>>, DecodeError> {
    let items = match root.get(field) {
        None | Some(Value::Null) => return Ok(None),
        Some(Value::Array(items)) => items,
        Some(other) => {
            return Err(DecodeError::envelope(
                field,
                format!("expected an array of objects, got {}", type_name(other)),
            ));
        }
    };
    items
        .iter()
        .enumerate()
        .map(|(i, item)| {
            item.as_object().ok_or_else(|| {
                DecodeError::envelope(
                    format!("{field}[{i}]"),
                    format!("expected an object, got {}", type_name(item)),
                )
            })
        })
        .collect::<Result<Vec<_>, _>>()
        .map(Some)
}

/// `ALTER: ALTER TABLE …` for skip reasons, the statement shortened.
fn ddl_text(root: &Map<String, Value>, kind: &str) -> String {
    match root.get("sql").and_then(Value::as_str) {
        Some(sql) if !sql.is_empty() => format!("{kind}: {}", super::error::shorten(sql, 120)),
        _ => kind.to_string(),
    }
}
